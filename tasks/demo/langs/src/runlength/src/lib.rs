//! Run-length encoding of text ("aaab" <-> "3a1b") and merging of integer ranges.

pub mod ranges;

use std::fmt;

/// Why a run-length string could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A character came without a count before it.
    MissingCount(usize),
    /// The text ended after a count.
    Truncated,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::MissingCount(at) => write!(f, "no count before position {at}"),
            DecodeError::Truncated => write!(f, "the text ends after a count"),
        }
    }
}

/// Encodes `text` as runs: a count, then the character ("aaab" -> "3a1b").
pub fn encode(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    let mut current = match chars.next() {
        Some(c) => c,
        None => return out,
    };
    let mut count = 1;
    for c in chars {
        if c == current {
            count += 1;
        } else {
            out.push_str(&format!("{count}{current}"));
            current = c;
            count = 1;
        }
    }
    out
}

/// Decodes what [`encode`] wrote. Counts may have several digits ("12a").
pub fn decode(encoded: &str) -> Result<String, DecodeError> {
    let mut out = String::new();
    let mut count: Option<usize> = None;
    for (at, c) in encoded.chars().enumerate() {
        if let Some(digit) = c.to_digit(10) {
            count = Some(digit as usize);
        } else {
            let n = count.take().ok_or(DecodeError::MissingCount(at))?;
            out.extend(std::iter::repeat(c).take(n));
        }
    }
    if count.is_some() {
        return Err(DecodeError::Truncated);
    }
    Ok(out)
}

/// The length of the longest run in `text`.
pub fn longest_run(text: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    let mut previous = None;
    for c in text.chars() {
        run = if Some(c) == previous { run + 1 } else { 1 };
        best = best.max(run);
        previous = Some(c);
    }
    best
}
