package semver

import "testing"

func TestParseRelease(t *testing.T) {
	v, err := Parse("1.2.3")
	if err != nil || v.Major != 1 || v.Minor != 2 || v.Patch != 3 {
		t.Fatalf("Parse(1.2.3) = %+v, %v", v, err)
	}
}

func TestParsePrefixAndMetadata(t *testing.T) {
	v, err := Parse("v2.0.0-rc.1+build.7")
	if err != nil {
		t.Fatal(err)
	}
	if v.String() != "2.0.0-rc.1+build.7" {
		t.Fatalf("got %s", v)
	}
}

func TestParseRejects(t *testing.T) {
	for _, text := range []string{"", "1", "1.2", "1.2.x", "a.b.c", "1.2.3.4"} {
		if _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q) accepted", text)
		}
	}
}

func TestCompareNumbers(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.0.0", "2.0.0", -1}, {"1.10.0", "1.9.0", 1}, {"1.2.3", "1.2.3", 0},
		{"1.2.3+a", "1.2.3+b", 0},
	}
	for _, c := range cases {
		if got := Compare(MustParse(c.a), MustParse(c.b)); got != c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestMax(t *testing.T) {
	got := Max(MustParse("0.9.0"), MustParse("1.0.0"), MustParse("0.10.0"))
	if got.String() != "1.0.0" {
		t.Fatalf("Max = %s", got)
	}
}

func TestBumpMajor(t *testing.T) {
	if got := Bump(MustParse("1.4.2"), "major").String(); got != "2.0.0" {
		t.Fatalf("got %s", got)
	}
}

func TestBumpPatchReleasesPrerelease(t *testing.T) {
	if got := Bump(MustParse("1.2.3-rc.1"), "patch").String(); got != "1.2.3" {
		t.Fatalf("got %s", got)
	}
}
