package semver

// Bump returns the next version for a change of the given kind: "major", "minor" or "patch".
// Lower fields restart at zero; pre-release and build metadata are dropped.
func Bump(v Version, kind string) Version {
	switch kind {
	case "major":
		return Version{Major: v.Major + 1}
	case "minor":
		return Version{Major: v.Major, Minor: v.Minor + 1, Patch: v.Patch}
	case "patch":
		if len(v.Pre) > 0 {
			// 1.2.3-rc.1 is released as 1.2.3
			return Version{Major: v.Major, Minor: v.Minor, Patch: v.Patch}
		}
		return Version{Major: v.Major, Minor: v.Minor, Patch: v.Patch + 1}
	}
	return v
}
