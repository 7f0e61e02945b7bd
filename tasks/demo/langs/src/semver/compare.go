package semver

import "strconv"

// Compare returns -1, 0 or +1 as a is lower than, equal to or higher than b. Build metadata
// is ignored; a pre-release is lower than the release it precedes.
func Compare(a, b Version) int {
	for _, d := range [][2]int{{a.Major, b.Major}, {a.Minor, b.Minor}, {a.Patch, b.Patch}} {
		if d[0] != d[1] {
			return sign(d[0] - d[1])
		}
	}
	return comparePre(a.Pre, b.Pre)
}

func comparePre(a, b []string) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	case len(b) == 0:
		return 1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareIdent(a[i], b[i]); c != 0 {
			return c
		}
	}
	return sign(len(a) - len(b))
}

func compareIdent(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return sign(x - y)
	case errA == nil:
		return -1 // numeric identifiers sort before alphanumeric ones
	case errB == nil:
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// Less reports whether a sorts before b.
func Less(a, b Version) bool { return Compare(a, b) < 0 }

// Max returns the highest of the versions (the zero Version for none).
func Max(versions ...Version) Version {
	var best Version
	for i, v := range versions {
		if i == 0 || Compare(v, best) > 0 {
			best = v
		}
	}
	return best
}
