//! The Pod front end.

pub mod attachments;
pub mod frontend;
