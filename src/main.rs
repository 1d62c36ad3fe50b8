//! sluice binary (placeholder).
fn main() {}
