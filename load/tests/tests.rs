//! The harness's integration tests, one module per topic. They run against a fake node
//! (`fake_cloud`) so the harness is tested on its own; runs against the real cloud come with it.

mod external;
mod fake_cloud;
