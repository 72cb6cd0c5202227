//! `cargo xtask fleet`: the fleet's tests against the real services they need, started by
//! this script: a throwaway PostgreSQL cluster and a throwaway Garage node. The tests are
//! `#[ignore]`d in a plain `cargo test` (they cannot run without the services) and named
//! here; the services' addresses and the key reach them in `MALJAN_TEST_*` variables.

use crate::cargo;
use crate::garage::{BUCKET, Garage};
use crate::postgres::Postgres;

/// Starts both services and runs the fleet crate's and the CLI's fleet tests against them
/// (those whose names hold `filter`, when one is given).
pub(crate) fn run_fleet_tests(filter: Option<&str>) -> Result<(), String> {
    let postgres = Postgres::start()?;
    let garage = Garage::start()?;
    let url = postgres.url();
    let pg_ctl = postgres.pg_ctl_command();
    // In a file, not the environment: the commands this script runs are printed.
    let secret_file = crate::empty_service_dir("fleet-secrets")?.join("s3-secret");
    std::fs::write(&secret_file, &garage.secret)
        .map_err(|e| format!("could not write the key's secret: {e}"))?;
    let secret_file = secret_file.display().to_string();
    let env = [
        ("MALJAN_TEST_POSTGRES", url.as_str()),
        ("MALJAN_TEST_PG_CTL", pg_ctl.as_str()),
        ("MALJAN_TEST_S3_ENDPOINT", garage.endpoint.as_str()),
        ("MALJAN_TEST_S3_KEY_ID", garage.key_id.as_str()),
        ("MALJAN_TEST_S3_SECRET_FILE", secret_file.as_str()),
        ("MALJAN_TEST_S3_BUCKET", BUCKET),
    ];
    let mut args = vec![
        "test",
        "-p",
        "maljan-fleet",
        "-p",
        "maljan-cli",
        "--test",
        "fleet",
        "--",
        "--ignored",
        // One at a time: a test stops and starts the one PostgreSQL they share.
        "--test-threads",
        "1",
    ];
    args.extend(filter);
    cargo(&args, &env)?;
    println!("xtask fleet: the fleet's tests passed against PostgreSQL and Garage");
    Ok(())
}
