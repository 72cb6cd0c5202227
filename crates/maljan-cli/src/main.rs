//! `maljan`: probe MCP servers, list their tools and call them.

mod arguments;
mod artefact;
mod authorization;
mod call;
mod config;
mod demo;
mod error;
mod exit_status;
mod fleet;
mod jobs;
mod ledger_file;
mod parameters;
mod progress;
mod render;
mod run;
mod runs;
mod stdout;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use maljan_client::{ClientError, ConnectionContext, ServerConnection};

use crate::config::Config;
use crate::error::CliError;
use crate::stdout::{errln, out};

/// Probe MCP tool servers, list their tools and call them.
///
/// With no --config, the bundled reference sidecar is the server named "sidecar" and the
/// default server.
#[derive(Debug, Parser)]
#[command(name = "maljan", version, after_help = exit_status::HELP)]
struct Cli {
    /// A TOML file naming servers (see the README).
    #[arg(long, global = true, env = "MALJAN_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// `--format`, with the older `--json` kept for one release.
#[derive(Debug, Clone, Copy, clap::Args)]
struct FormatOption {
    /// Output format: text for a person, or one JSON document (with its schema_version).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The same as --format json (the older spelling, kept for one release).
    #[arg(long, hide = true)]
    json: bool,
}

impl FormatOption {
    fn get(self) -> Format {
        if self.json { Format::Json } else { self.format }
    }
}

#[derive(Debug, Subcommand)]
enum StoreAction {
    /// Apply the schema versions this build knows and the database lacks.
    Migrate,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Connect, set up, and print the server card: tools, unavailable ones with reason and
    /// remediation, stray-line counts. Exits non-zero when the server is unreachable.
    Probe {
        /// The server (default: the config's default_server, else "sidecar").
        server: Option<String>,
        /// A stdio server's command, instead of a configured server: `maljan probe -- npx
        /// -y @modelcontextprotocol/server-everything`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        #[command(flatten)]
        format: FormatOption,
    },
    /// Print the tools a model may see (platform primitives left out), each with its
    /// parameters: type, whether required, default and description.
    Tools {
        /// The server.
        server: Option<String>,
        /// Only this tool.
        tool: Option<String>,
        /// A stdio server's command, instead of a configured server: `maljan tools -- npx
        /// -y @modelcontextprotocol/server-everything`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        #[command(flatten)]
        format: FormatOption,
    },
    /// Call one tool. Arguments: key=value (a string), key:=JSON (any JSON value), or --json.
    Call(call::CallCommand),
    /// Carry out a triage pack on a sample, in one job, over the configured servers, and
    /// write its report (report.json, report.md, report.html) into the job's directory. Exit
    /// status: 0 every step completed, 3 degraded (some steps failed or were skipped, at
    /// least one completed), 4 failed (no step completed), 130 interrupted (Ctrl-C,
    /// SIGTERM), 2 refused before anything ran.
    Run(run::RunCommand),
    /// Run the bundled pack on a generated sample against the reference sidecar twice, on
    /// this host over stdio and served over HTTP on loopback, and write the report.
    Demo(demo::DemoCommand),
    /// Print a finished run's report: its Markdown, or its JSON with --format json.
    Report {
        /// The job's directory, or a run's id: found in the fleet of `[store]` (its report
        /// read from the object store), else among the jobs beside the ledger.
        job: PathBuf,
        /// The ledger whose jobs hold the run, when there is no `[store]`.
        #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
        ledger: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Write a file a run took, named by its sha256 as the run's report lists it, to --out:
    /// from the object store of `[store]`, else from the jobs beside the ledger. Checked
    /// against its digest on the way.
    Artefact(artefact::ArtefactCommand),
    /// Authorize maljan for an HTTP server behind OAuth 2.1: approve it in a browser (opened,
    /// or its URL printed), which comes back to a listener on loopback; the tokens are kept
    /// in the system's keyring, else in a file only you can read, and refreshed before they
    /// expire by the commands that follow.
    Login(authorization::login::LoginCommand),
    /// Forget the tokens `maljan login` kept for a server.
    Logout(authorization::login::LogoutCommand),
    /// Queue a run of PACK for each SAMPLE on the fleet of `[store]`: each sample is stored
    /// once in the object store (by its sha256); `maljan worker` carries the runs out.
    Submit(fleet::SubmitCommand),
    /// Take the fleet's runs and carry them out on this host, one after another, until
    /// Ctrl-C or SIGTERM (which hands the run under way back) or, with --until-empty, until
    /// none is left.
    Worker(fleet::WorkerCommand),
    /// List the latest runs: the fleet's of `[store]` (state, attempts, sample, verdict or
    /// why it failed), else those whose jobs are beside the ledger.
    Runs {
        /// How many of the latest runs.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The ledger whose jobs are listed, when there is no `[store]`.
        #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
        ledger: Option<PathBuf>,
        #[command(flatten)]
        format: FormatOption,
    },
    /// The fleet's store: `maljan store migrate` brings PostgreSQL's schema to this
    /// build's version (workers do it too when they start).
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
    /// Print a ledger: the failure summary (each distinct failure once, with its count),
    /// then every call.
    Ledger {
        /// The ledger file (default: where `maljan call` records).
        #[arg(env = "MALJAN_LEDGER")]
        path: Option<PathBuf>,
        /// Only the calls of the job in DIR (its summary is then the job's).
        #[arg(long, value_name = "DIR")]
        job: Option<PathBuf>,
        /// Read the fleet's ledger in PostgreSQL (`[store]`) instead of a file (PATH and
        /// MALJAN_LEDGER are not read); its failure summary is computed by the database.
        #[arg(long, conflicts_with = "job")]
        fleet: bool,
        #[command(flatten)]
        query: fleet::LedgerFilter,
        #[command(flatten)]
        format: FormatOption,
    },
    /// List the jobs beside the ledger with their size, age and verdict; `jobs prune
    /// --older-than 7d` removes the old ones.
    Jobs(jobs::JobsCommand),
    /// Print the completion script of SHELL, e.g. `maljan completions bash >
    /// ~/.local/share/bash-completion/completions/maljan`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `maljan man > ~/.local/share/man/man1/maljan.1`.
    Man,
    /// Serve the bundled reference sidecar over stdio (what "sidecar" runs), or over
    /// Streamable HTTP on a loopback address (what the demo's "remote" is).
    #[command(hide = true)]
    Sidecar {
        /// Serve HTTP at http://ADDR/mcp instead of stdio (loopback only: no token).
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .try_init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Sidecar { .. }) {
        init_logging();
    }
    match dispatch(cli).await {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {e}");
            e.exit_status()
        }
    }
}

async fn connect(config: &Config, server: Option<&str>) -> Result<ServerConnection, CliError> {
    let server_config = config.server(server)?;
    Ok(ServerConnection::connect(
        &server_config,
        config.settings.clone(),
        ConnectionContext::default(),
    )
    .await?)
}

/// Prints `value` as the invocation's one JSON document; an object without a
/// `schema_version` gets the current one, so that every document says its shape.
fn print_json<T: serde::Serialize>(value: &T) {
    let mut value = serde_json::to_value(value).unwrap_or_default();
    if let serde_json::Value::Object(map) = &mut value {
        map.entry("schema_version")
            .or_insert(serde_json::Value::from(JSON_SCHEMA_VERSION));
    }
    let mut json = serde_json::to_string_pretty(&value).unwrap_or_default();
    json.push('\n');
    stdout::write_json(&json);
}

/// The version of the JSON documents' shapes (the README's "Scripting" section).
const JSON_SCHEMA_VERSION: u32 = 1;

async fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    if let Command::Sidecar { http } = &cli.command {
        match http {
            None => maljan_sidecar::serve_stdio().await,
            Some(addr) => {
                let options = maljan_sidecar_kit::HttpOptions::default();
                maljan_sidecar::serve_http(addr, options, maljan_sidecar::server()).await
            }
        }
        .map_err(CliError::Sidecar)?;
        return Ok(ExitCode::SUCCESS);
    }
    match &cli.command {
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "maljan", &mut script);
            stdout::write_bytes(&script);
            return Ok(ExitCode::SUCCESS);
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut page)
                .map_err(CliError::Output)?;
            stdout::write_bytes(&page);
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let config_path = cli.config.clone();
    let mut config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Probe {
            server,
            command,
            format,
        } => {
            config.add_command_server(&command, None);
            let server = if command.is_empty() { server } else { None };
            let connection = connect(&config, server.as_deref()).await?;
            let card = connection.card();
            if format.get() == Format::Json {
                print_json(&card);
            } else {
                out!("{}", render::card(&card));
            }
            connection.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            server,
            mut tool,
            command,
            format,
        } => {
            // With a command, the one word before `--` is the tool.
            let server = if command.is_empty() {
                server
            } else {
                tool = tool.or(server);
                None
            };
            config.add_command_server(&command, None);
            let connection = connect(&config, server.as_deref()).await?;
            let mut tools = connection.model_tools();
            if let Some(name) = &tool {
                let known: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                tools.retain(|t| &t.name == name);
                if tools.is_empty() {
                    let server = connection.name().to_owned();
                    connection.close().await;
                    return Err(CliError::Client(ClientError::UnknownTool {
                        server,
                        tool: name.clone(),
                        known,
                    }));
                }
            }
            if format.get() == Format::Json {
                print_json(&serde_json::json!({"server": connection.name(), "tools": tools}));
            } else {
                out!("{}", render::tools(&tools));
            }
            connection.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call(options) => call::run(config, options).await,
        Command::Run(options) => run::run(config, options).await,
        Command::Demo(options) => match options.fleet() {
            Some(fleet_demo) => fleet::demo::run(&config, config_path.as_deref(), fleet_demo).await,
            None => demo::run(config, options).await,
        },
        Command::Report {
            job,
            format,
            ledger,
        } => {
            if job.is_dir() {
                run::print_report(&job, format)
            } else {
                let run = job.display().to_string();
                if config.store.is_some() {
                    let fleet = fleet::FleetRuns(fleet::Fleet::connect(&config).await?);
                    runs::show_report(&fleet, &run, format).await
                } else {
                    runs::show_report(&local_runs(ledger), &run, format).await
                }
            }
        }
        Command::Artefact(options) => artefact::run(&config, options).await,
        Command::Login(options) => authorization::login::login(&config, options).await,
        Command::Logout(options) => authorization::login::logout(&config, &options),
        Command::Submit(options) => fleet::submit::run(config, options).await,
        Command::Worker(options) => fleet::worker::run(config, options).await,
        Command::Runs {
            limit,
            format,
            ledger,
        } => {
            if config.store.is_some() {
                let fleet = fleet::FleetRuns(fleet::Fleet::connect(&config).await?);
                runs::list(&fleet, limit, format.get()).await
            } else {
                runs::list(&local_runs(ledger), limit, format.get()).await
            }
        }
        Command::Store {
            action: StoreAction::Migrate,
        } => fleet::migrate(&config).await,
        Command::Jobs(options) => jobs::run(options),
        Command::Ledger {
            fleet: true,
            query,
            format,
            ..
        } => fleet::print_ledger(&config, &query, format.get()).await,
        Command::Ledger {
            path, format, job, ..
        } => {
            let path = path.unwrap_or_else(ledger_file::default_path);
            let mut file = maljan_ledger::read_json_lines(&path).map_err(CliError::Ledger)?;
            if let Some(job) = job {
                // Entries name the job by its canonical directory.
                let job = job.canonicalize().unwrap_or(job).display().to_string();
                file.entries
                    .retain(|e| e.call.scope.job.as_deref() == Some(job.as_str()));
            }
            for skipped in &file.skipped {
                let what = if skipped.torn {
                    "a torn last line (a write cut short by a crash)"
                } else {
                    "a line that is not a ledger entry"
                };
                errln!(
                    "{}: line {} skipped, {what}: {}",
                    path.display(),
                    skipped.line,
                    skipped.reason
                );
            }
            if format.get() == Format::Json {
                print_json(&maljan_ledger::LedgerReport::of(&file.entries));
            } else {
                out!(
                    "{}",
                    maljan_ledger::render_summary(&maljan_ledger::failure_summary(&file.entries))
                );
                out!("{}", maljan_ledger::render_table(&file.entries));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sidecar { .. } | Command::Completions { .. } | Command::Man => {
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The run index of the jobs beside `ledger` (the default ledger when none is named).
fn local_runs(ledger: Option<PathBuf>) -> maljan_client::JobsDirectory {
    let ledger = ledger.unwrap_or_else(ledger_file::default_path);
    maljan_client::JobsDirectory::new(ledger_file::jobs_dir(&ledger))
}
