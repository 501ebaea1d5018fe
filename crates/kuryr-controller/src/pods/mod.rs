//! The Pod front end.

pub mod frontend;
