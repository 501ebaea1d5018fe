pub mod burst;
