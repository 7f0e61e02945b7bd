//! Sets of integers kept as sorted, disjoint, inclusive ranges.

/// An inclusive range `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Range {
    pub start: i64,
    pub end: i64,
}

impl Range {
    pub fn new(start: i64, end: i64) -> Range {
        assert!(start <= end, "start {start} after end {end}");
        Range { start, end }
    }

    pub fn len(&self) -> u64 {
        (self.end - self.start) as u64 + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, value: i64) -> bool {
        self.start <= value && value <= self.end
    }
}

/// Sorts `ranges` and merges those that overlap, so that no two of the result overlap.
pub fn merge(mut ranges: Vec<Range>) -> Vec<Range> {
    ranges.sort();
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// How many integers the ranges cover together.
pub fn covered(ranges: &[Range]) -> u64 {
    merge(ranges.to_vec()).iter().map(Range::len).sum()
}
