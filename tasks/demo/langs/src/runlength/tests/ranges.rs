use runlength::ranges::{covered, merge, Range};

#[test]
fn merges_overlapping() {
    let got = merge(vec![Range::new(5, 9), Range::new(1, 6)]);
    assert_eq!(got, vec![Range::new(1, 9)]);
}

#[test]
fn keeps_disjoint_sorted() {
    let got = merge(vec![Range::new(10, 12), Range::new(1, 2)]);
    assert_eq!(got, vec![Range::new(1, 2), Range::new(10, 12)]);
}

#[test]
fn contains_bounds() {
    let r = Range::new(3, 7);
    assert!(r.contains(3) && r.contains(7) && !r.contains(8));
}
