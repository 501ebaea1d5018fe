pub mod burst;
pub mod churn;
pub mod datapath;
pub mod scale;
pub mod services;
