//! A throwaway S3-compatible object store for the tests that need a real one: Garage (from
//! crates.io, installed once into cargo's bin directory with only what one test node needs),
//! one node on loopback with SQLite metadata, its layout applied, a key and a bucket allowed
//! to it; stopped when the guard is dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{empty_service_dir, free_loopback_port, on_path, root, run};

/// The pinned Garage and the features a single test node needs.
const GARAGE_VERSION: &str = "2.5.0";
const GARAGE_FEATURES: &str = "sqlite,bundled-libs";
/// How long the node is given to answer once started.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// The bucket and key the tests use.
pub(crate) const BUCKET: &str = "maljan-test";
const KEY_NAME: &str = "maljan-test";

/// A running node; dropping it stops it.
#[derive(Debug)]
pub(crate) struct Garage {
    server: Child,
    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub(crate) endpoint: String,
    /// The access key's id and secret.
    pub(crate) key_id: String,
    pub(crate) secret: String,
}

impl Garage {
    /// Installs Garage when missing, then makes and starts a new node.
    pub(crate) fn start() -> Result<Garage, String> {
        let garage = installed()?;
        let dir = empty_service_dir("garage")?;
        let (rpc, s3) = (free_loopback_port()?, free_loopback_port()?);
        let config = dir.join("garage.toml");
        let text = format!(
            "metadata_dir = {:?}\ndata_dir = {:?}\ndb_engine = \"sqlite\"\n\
             replication_factor = 1\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{}\"\n\n[s3_api]\n\
             s3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{s3}\"\n\
             root_domain = \".s3.garage.localhost\"\n",
            dir.join("meta").display().to_string(),
            dir.join("data").display().to_string(),
            random_hex(32)?
        );
        std::fs::write(&config, text).map_err(|e| format!("could not write the config: {e}"))?;
        let log = std::fs::File::create(dir.join("server.log"))
            .map_err(|e| format!("could not create the server's log: {e}"))?;
        let server = Command::new(&garage)
            .arg("-c")
            .arg(&config)
            .arg("server")
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", garage.display()))?;
        let mut node = Garage {
            server,
            endpoint: format!("http://127.0.0.1:{s3}"),
            key_id: String::new(),
            secret: String::new(),
        };
        let cli = |args: &[&str]| -> Result<String, String> {
            let output = Command::new(&garage)
                .arg("-c")
                .arg(&config)
                .args(args)
                .output()
                .map_err(|e| format!("garage {args:?} could not run: {e}"))?;
            if output.status.success() {
                Ok(String::from_utf8_lossy(&output.stdout).into_owned())
            } else {
                Err(format!(
                    "garage {args:?} failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                ))
            }
        };
        // The node answers its own CLI once its RPC is up: asked until then, within a bound.
        let started = Instant::now();
        let status = loop {
            match cli(&["status"]) {
                Ok(status) => break status,
                Err(e) if started.elapsed() > READY_WITHIN => {
                    return Err(format!("the Garage node did not come up: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let node_id = status
            .lines()
            .find(|line| line.contains("NO ROLE ASSIGNED"))
            .and_then(|line| line.split_whitespace().next())
            .ok_or_else(|| format!("the node's id is not in its status:\n{status}"))?
            .to_owned();
        cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node_id])?;
        cli(&["layout", "apply", "--version", "1"])?;
        let key = cli(&["key", "create", KEY_NAME])?;
        let field = |name: &str| {
            key.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|value| value.trim().to_owned())
                .ok_or_else(|| format!("no {name} in the new key:\n{key}"))
        };
        node.key_id = field("Key ID:")?;
        node.secret = field("Secret key:")?;
        cli(&["bucket", "create", BUCKET])?;
        cli(&[
            "bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", KEY_NAME,
        ])?;
        Ok(node)
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// `cargo xtask garage`: starts a node, puts an object and reads it back with signed
/// requests (curl's SigV4), and stops it.
pub(crate) fn check() -> Result<(), String> {
    let node = Garage::start()?;
    let dir = root().join("target/services/garage");
    let object = dir.join("object.txt");
    let body = "an object put by cargo xtask garage\n";
    std::fs::write(&object, body).map_err(|e| format!("could not write the object: {e}"))?;
    let url = format!("{}/{BUCKET}/object.txt", node.endpoint);
    let signed = |payload_sha256: &str| {
        let mut curl = Command::new("curl");
        curl.args(["--silent", "--show-error", "--fail"])
            .args(["--aws-sigv4", "aws:amz:garage:s3"])
            .arg("--user")
            .arg(format!("{}:{}", node.key_id, node.secret))
            .arg("-H")
            .arg(format!("x-amz-content-sha256: {payload_sha256}"));
        curl
    };
    // Run without `run`, which prints the command: it holds the key's secret.
    let put = signed(&sha256_hex(body.as_bytes())?)
        .arg("--upload-file")
        .arg(&object)
        .arg(&url)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("curl could not run: {e}"))?;
    if !put.success() {
        return Err(format!("the signed PUT of {url} failed ({put})"));
    }
    let empty = sha256_hex(b"")?;
    let read = signed(&empty)
        .arg(&url)
        .output()
        .map_err(|e| format!("curl could not run: {e}"))?;
    if read.stdout != body.as_bytes() {
        return Err(format!(
            "the object read back differs: {:?}",
            String::from_utf8_lossy(&read.stdout)
        ));
    }
    println!(
        "xtask garage: a node at {} stored and served an object in bucket {BUCKET}",
        node.endpoint
    );
    Ok(())
}

/// Garage's program: on the path, in cargo's bin directory, or installed there now.
fn installed() -> Result<PathBuf, String> {
    if on_path("garage") {
        return Ok(PathBuf::from("garage"));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let garage = home.join("bin/garage");
    if !garage.is_file() {
        println!(
            "xtask: Garage is missing; installing garage {GARAGE_VERSION} (features \
             {GARAGE_FEATURES}) into cargo's bin directory, once (about 12 minutes here)"
        );
        run(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
                .args(["install", "garage", "--locked", "--no-default-features"])
                .args(["--version", GARAGE_VERSION, "--features", GARAGE_FEATURES]),
        )?;
    }
    Ok(garage)
}

/// `bytes` random bytes from the system, in hex.
fn random_hex(bytes: usize) -> Result<String, String> {
    let mut random = vec![0u8; bytes];
    getrandom::getrandom(&mut random).map_err(|e| format!("no random bytes: {e}"))?;
    Ok(hex(&random))
}

/// The sha256 of `bytes` in hex.
fn sha256_hex(bytes: &[u8]) -> Result<String, String> {
    use sha2::Digest;
    Ok(hex(&sha2::Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
