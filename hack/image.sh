#!/usr/bin/env bash
# Which image an environment deploys, and the environment tags: promotion by digest, never a
# rebuild. The deploy workflow calls it; the tests run it against a real registry.
#
#   hack/image.sh digest <env> <commit>
#       Prints the digest <env> must deploy for <commit>:
#         dev      the image CI built and scanned for <commit> (tag sha-<commit>; CI sets that
#                  tag only after the scan passed);
#         staging  an image dev ran, prod an image staging ran, with its smoke test passed there
#                  (`tag` records that) — the image CI built from a develop commit with the
#                  same source tree as <commit>.
#                  A merge, squash or rebase that brings the lower branch over unchanged gives a
#                  new commit with the same tree, so it promotes; a commit with changes of its
#                  own never reached the lower environment: refused.
#   hack/image.sh release <version>
#       Prints the digest of a published release (tag <version>, e.g. 1.2.3): a deploy by hand.
#   hack/image.sh tag <digest> <env>
#       After the smoke test passed: moves the tag <env> (what <env> runs now) to <digest>, and
#       tags it <env>-<digest's hex> (a record that it passed <env>, read by the next promotion).
#
#   env: IMAGE_REPOSITORY (ghcr.io/<owner>/database-operator), CRANE (crane), CRANE_FLAGS (e.g.
#        --insecure for a plain-HTTP test registry), LOWER_REF_PREFIX (origin/: where develop is
#        found in git), SEARCH_DEPTH (1000 commits of develop).
set -euo pipefail
crane="${CRANE:-crane}"
repository="${IMAGE_REPOSITORY:?IMAGE_REPOSITORY is the image repository, e.g. ghcr.io/owner/database-operator}"
read -r -a crane_flags <<<"${CRANE_FLAGS:-}"
prefix="${LOWER_REF_PREFIX-origin/}"

die() { echo "image: $*" >&2; exit 1; }
log() { echo "[image] $*" >&2; }

# digest_of TAG: the digest a tag names, or nothing if the registry says it does not exist.
# Any other failure (no answer, no access) stops here: it must not read as "never built".
digest_of() {
  local out
  if out="$("$crane" digest "${crane_flags[@]}" "$repository:$1" 2>&1)"; then
    tail -n 1 <<<"$out"
  elif ! grep -qE 'MANIFEST_UNKNOWN|NAME_UNKNOWN|404 Not Found' <<<"$out"; then
    die "cannot read $repository:$1: $(tail -n 1 <<<"$out")"
  fi
}

lower_of() {
  case "$1" in
    staging) echo dev ;;
    prod) echo staging ;;
    *) die "unknown environment '$1' (dev, staging or prod)" ;;
  esac
}

digest_for() {
  local env="$1" commit="$2"
  [[ "$commit" =~ ^[0-9a-f]{40}$ ]] || die "'$commit' is not a full commit SHA"
  if [[ "$env" == dev ]]; then
    local digest
    digest="$(digest_of "sha-$commit")"
    [[ -n "$digest" ]] || die "no scanned image for $commit ($repository:sha-$commit): CI tags an image only after its scan passed"
    log "dev deploys the image CI built and scanned for $commit: $digest"
    echo "$digest"
    return
  fi
  local lower_env tree source built
  lower_env="$(lower_of "$env")"
  tree="$(git rev-parse "$commit^{tree}")"
  # Images are built from develop only: the newest develop commit with this exact source tree.
  # awk reads to the end: an early exit would kill git log with SIGPIPE, fatal under pipefail.
  source="$(git log --format='%H %T' -n "${SEARCH_DEPTH:-1000}" "${prefix}develop" -- |
    awk -v tree="$tree" '!found && $2 == tree { print $1; found = 1 }')"
  [[ -n "$source" ]] || die "$commit's source tree was never on develop, so no image was built from it and $lower_env never ran it: bring develop into the $env branch as it is (any merge, squash or rebase that adds no change of its own), or deploy a release by hand (workflow_dispatch with its version)"
  built="$(digest_of "sha-$source")"
  [[ -n "$built" ]] || die "no scanned image for $source ($repository:sha-$source), the develop commit with $commit's tree"
  [[ -n "$(digest_of "$lower_env-${built#sha256:}")" ]] || die "$lower_env never passed a smoke test with $source's image ($built): deploy it to $lower_env first"
  log "$env deploys what $lower_env ran and passed: $built (built from $source, the same tree as $commit)"
  echo "$built"
}

command="${1:?usage: hack/image.sh digest <env> <commit> | release <version> | tag <digest> <env>}"
case "$command" in
  digest) digest_for "${2:?environment}" "${3:?commit}" ;;
  release)
    version="${2:?version}"
    [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "'$version' is not a release version (1.2.3)"
    digest="$(digest_of "$version")"
    [[ -n "$digest" ]] || die "no release $version ($repository:$version does not exist)"
    echo "$digest"
    ;;
  tag)
    digest="${2:?digest}" env="${3:?environment}"
    [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "'$digest' is not a sha256 digest"
    case "$env" in dev | staging | prod) ;; *) die "unknown environment '$env'" ;; esac
    "$crane" tag "${crane_flags[@]}" "$repository@$digest" "$env-${digest#sha256:}" >/dev/null
    "$crane" tag "${crane_flags[@]}" "$repository@$digest" "$env" >/dev/null
    log "$repository:$env -> $digest"
    ;;
  *) die "unknown command '$command' (digest, release or tag)" ;;
esac
