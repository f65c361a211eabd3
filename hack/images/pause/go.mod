// The sandbox image's program (hack/images/pause/build.sh); standard library only.
module github.com/example/database-operator/hack/images/pause

go 1.24.0
