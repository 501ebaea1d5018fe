//! Prints every Kuryr CRD as one multi-document YAML stream:
//! `cargo run -p kuryr-api --bin crdgen > deploy/crds/kuryr-crds.yaml`, or `... | kubectl apply -f -`.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let yaml = match kuryr_api::crds::crds_yaml() {
        Ok(yaml) => yaml,
        Err(e) => {
            eprintln!("crdgen: {e}");
            return ExitCode::FAILURE;
        }
    };
    match std::io::stdout().lock().write_all(yaml.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crdgen: writing stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
