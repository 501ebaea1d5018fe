//! The Pod front end.

pub mod finalizer;
pub mod frontend;
