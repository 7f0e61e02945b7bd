module example.com/semver

go 1.21
