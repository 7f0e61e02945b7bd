// Package semver parses, compares and bumps semantic versions (https://semver.org).
package semver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed semantic version.
type Version struct {
	Major, Minor, Patch int
	Pre                 []string // dot-separated pre-release identifiers
	Build               string
}

// ErrInvalid is returned for text that is not a semantic version.
var ErrInvalid = errors.New("semver: invalid version")

// Parse reads "1.2.3", "1.2.3-rc.1", "1.2.3+build.5" or the same with a leading "v".
func Parse(text string) (Version, error) {
	var v Version
	s := strings.TrimPrefix(text, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		v.Build = s[i+1:]
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		v.Pre = strings.Split(s[i+1:], ".")
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%w: %q", ErrInvalid, text)
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := number(p)
		if err != nil {
			return Version{}, fmt.Errorf("%w: %q", ErrInvalid, text)
		}
		nums[i] = n
	}
	v.Major, v.Minor, v.Patch = nums[0], nums[1], nums[2]
	return v, nil
}

func number(p string) (int, error) {
	if p == "" {
		return 0, ErrInvalid
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, ErrInvalid
		}
	}
	return strconv.Atoi(p)
}

// MustParse is Parse for constants: it panics on invalid text.
func MustParse(text string) Version {
	v, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return v
}

// String formats the version without a leading "v".
func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Pre) > 0 {
		s += "-" + strings.Join(v.Pre, ".")
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}
