use runlength::{decode, encode, longest_run, DecodeError};

#[test]
fn empty_text() {
    assert_eq!(encode(""), "");
    assert_eq!(decode(""), Ok(String::new()));
}

#[test]
fn decode_single_digit_counts() {
    assert_eq!(decode("3a1b").unwrap(), "aaab");
}

#[test]
fn decode_errors() {
    assert_eq!(decode("a"), Err(DecodeError::MissingCount(0)));
    assert_eq!(decode("2a3"), Err(DecodeError::Truncated));
}

#[test]
fn longest() {
    assert_eq!(longest_run("abbbcc"), 3);
    assert_eq!(longest_run(""), 0);
}
