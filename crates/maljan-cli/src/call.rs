//! `maljan call`: one call through the whole pipeline, with staging when asked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    ConnectionContext, Job, Ledger, ReportBuilder, ServerConfig, ServerConnection, ServerTransport,
};
use maljan_mcp_proto::maljan::FileReach;
use serde_json::{Value, json};

use crate::arguments::WrittenArguments;
use crate::config::{Config, Staging};
use crate::error::CliError;
use crate::stdout::{out, outln};
use crate::{Format, exit_status, ledger_file, print_json, progress, render};

/// The `call` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct CallCommand {
    /// The server (left out when its command follows `--`).
    pub(crate) server: String,
    /// The tool.
    pub(crate) tool: Option<String>,
    /// key=value (typed by the tool's input schema: a=2 sends a number where the schema
    /// says integer), key=@FILE (the file's text), or key:=JSON (any JSON value, as
    /// written).
    pub(crate) arguments: Vec<String>,
    /// All arguments as one JSON object (pairs are added on top).
    #[arg(long = "args", alias = "json", value_name = "OBJECT")]
    pub(crate) args: Option<String>,
    /// How long to wait when the server's manifest gives no timeout_s, in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) timeout: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,
    /// Print the server card before the answer.
    #[arg(long)]
    pub(crate) card: bool,
    /// The JSON Lines file the call is recorded in
    /// (default: $XDG_STATE_HOME/maljan/ledger.jsonl or ~/.local/state/maljan/ledger.jsonl).
    #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
    pub(crate) ledger: Option<PathBuf>,
    /// Copy FILE into the job's directory as the sample and pass that copy wherever an
    /// argument names FILE; a server elsewhere gets it uploaded (the transport decides).
    /// Without it, a file an argument names is staged so only where the server needs it (a
    /// server elsewhere, one with a sample mount, one whose manifest says it reads only its
    /// job: the kit's); any other server gets the path as written (a server's `staging`
    /// setting says otherwise).
    #[arg(long, value_name = "FILE")]
    pub(crate) stage: Option<PathBuf>,
    /// The job's directory (default with --stage or --take: a new one beside the ledger).
    #[arg(long, value_name = "DIR")]
    pub(crate) job: Option<PathBuf>,
    /// Take the files the tool names in its answer into the job's artefact store.
    #[arg(long)]
    pub(crate) take: bool,
    /// A stdio server's command, instead of a configured server: `maljan call get-sum a=2
    /// b=3 -- npx -y @modelcontextprotocol/server-everything`.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

impl CallCommand {
    /// The server's name (none when its command follows `--`) and the tool's: with a
    /// command, the first word is the tool and the rest are its arguments.
    fn server_and_tool(&mut self) -> Result<(Option<String>, String), CliError> {
        if self.command.is_empty() {
            let tool = self.tool.take().ok_or_else(|| CliError::BadArgument {
                argument: self.server.clone(),
                detail: "name the server and the tool: maljan call SERVER TOOL [key=value…], \
                         or maljan call TOOL [key=value…] -- SERVER-COMMAND"
                    .to_owned(),
            })?;
            return Ok((Some(self.server.clone()), tool));
        }
        if let Some(first) = self.tool.take() {
            self.arguments.insert(0, first);
        }
        Ok((None, self.server.clone()))
    }
}

/// Replaces argument values naming `file` by `sample`; how many were replaced.
fn point_at_sample(arguments: &mut Value, file: &Path, sample: &Path) -> usize {
    let Value::Object(map) = arguments else {
        return 0;
    };
    let canonical = file.canonicalize().ok();
    let mut replaced = 0;
    for value in map.values_mut() {
        let Value::String(s) = value else { continue };
        let named = Path::new(s.as_str());
        if named == file || named.canonicalize().ok() == canonical {
            *value = Value::String(sample.display().to_string());
            replaced += 1;
        }
    }
    replaced
}

/// The first local regular file a top-level string argument names, if any.
fn local_file_argument(arguments: &Value) -> Option<PathBuf> {
    let Value::Object(map) = arguments else {
        return None;
    };
    map.values()
        .filter_map(Value::as_str)
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// What a call is made in: its job (when it has one), what the call told of the job's files,
/// and the file staged with its copy in the job.
struct CallJob {
    job: Option<Arc<Job>>,
    heard: Arc<ReportBuilder>,
    staged: Option<(PathBuf, PathBuf)>,
}

/// Whether a file an argument names goes to the server as the job's copy: `Some` when the
/// configuration or the transport says, `None` when the server's manifest decides.
fn staging_of(config: &Config, server: &ServerConfig) -> Option<bool> {
    match config.staging(&server.name) {
        Staging::Always => Some(true),
        Staging::Never => Some(false),
        Staging::Auto => match &server.transport {
            ServerTransport::Stdio(_) if server.sample_mount.is_none() => None,
            // On another host, or reading the job through a mount: only a staged file
            // reaches it.
            _ => Some(true),
        },
    }
}

/// Whether the server says it reads only its job's directory.
fn reads_job_only(connection: &ServerConnection) -> bool {
    connection
        .setup()
        .manifest
        .as_ref()
        .and_then(|manifest| manifest.files)
        == Some(FileReach::Job)
}

/// Makes the call's job (with `stage`'s copy in it, `arguments` pointed at the copy) when
/// one is asked for, and connects to the server in it.
async fn connect(
    config: &Config,
    server: &ServerConfig,
    options: &CallCommand,
    ledger: (&Arc<Ledger>, &Path),
    stage: Option<&Path>,
    arguments: &mut Value,
) -> Result<(ServerConnection, CallJob), CliError> {
    let (ledger, ledger_path) = ledger;
    let mut context = ConnectionContext::default().with_ledger(ledger.clone());
    let job = if stage.is_some() || options.job.is_some() || options.take {
        let dir = options
            .job
            .clone()
            .unwrap_or_else(|| ledger_file::new_job_dir(ledger_path));
        let job = Job::create(&dir).map_err(|e| CliError::Job {
            path: dir,
            source: e,
        })?;
        Some(Arc::new(job))
    } else {
        None
    };
    let mut staged = None;
    if let (Some(job), Some(file)) = (&job, stage) {
        let sample = job.add_sample(file).map_err(|e| CliError::Job {
            path: file.to_owned(),
            source: e,
        })?;
        if point_at_sample(arguments, file, &sample.path) == 0 {
            return Err(CliError::BadArgument {
                argument: file.display().to_string(),
                detail: "--stage FILE must also be passed as an argument, e.g. path=FILE"
                    .to_owned(),
            });
        }
        staged = Some((file.to_owned(), sample.path.clone()));
    }
    let heard = Arc::new(ReportBuilder::default());
    if let Some(job) = &job {
        context = context.with_job(job.clone()).recording_to(heard.clone());
    }
    if let Some(reporter) = progress::terminal_reporter() {
        context = context.with_progress(reporter);
    }
    let connection = ServerConnection::connect(server, config.settings.clone(), context).await?;
    Ok((connection, CallJob { job, heard, staged }))
}

pub(crate) async fn run(
    mut config: Config,
    mut options: CallCommand,
) -> Result<ExitCode, CliError> {
    let (server, tool) = options.server_and_tool()?;
    config.add_command_server(&options.command, None);
    let written = WrittenArguments::parse(&options.arguments, options.args.as_deref())?;
    let mut arguments = written.untyped();
    let server_config = config.server(server.as_deref())?;
    let ledger_path = options
        .ledger
        .clone()
        .unwrap_or_else(ledger_file::default_path);
    let ledger = Arc::new(Ledger::json_lines(&ledger_path).map_err(CliError::Ledger)?);
    if let Some(t) = options.timeout {
        config.settings.default_timeout =
            Duration::try_from_secs_f64(t).map_err(|_| CliError::BadArgument {
                argument: t.to_string(),
                detail: "--timeout takes a positive number of seconds".to_owned(),
            })?;
    }
    let named_file = local_file_argument(&arguments);
    let staging = staging_of(&config, &server_config);
    let stage = match (&options.stage, staging) {
        (Some(file), _) => Some(file.clone()),
        (None, Some(true)) => named_file.clone(),
        (None, _) => None,
    };
    let (mut connection, mut call_job) = connect(
        &config,
        &server_config,
        &options,
        (&ledger, &ledger_path),
        stage.as_deref(),
        &mut arguments,
    )
    .await?;
    // A server that reads only its job's directory gets the file as the job's copy: the
    // connection is made again, in a job that holds it.
    if let (None, None, Some(file)) = (&stage, staging, &named_file)
        && reads_job_only(&connection)
    {
        connection.close().await;
        (connection, call_job) = connect(
            &config,
            &server_config,
            &options,
            (&ledger, &ledger_path),
            Some(file),
            &mut arguments,
        )
        .await?;
    }
    let CallJob { job, heard, staged } = call_job;
    let card = options.card.then(|| connection.card());
    if let (Some(card), Format::Text) = (&card, options.format) {
        outln!("{}", render::card(card));
    }
    let schema = connection
        .model_tools()
        .into_iter()
        .find(|offered| offered.name == tool)
        .map(|tool| tool.input_schema.clone());
    if let Some(schema) = schema {
        match written.typed(&tool, &schema) {
            Ok(typed) => arguments = typed,
            Err(refused) => {
                connection.close().await;
                return Err(refused);
            }
        }
        if let Some((file, sample)) = &staged {
            point_at_sample(&mut arguments, file, sample);
        }
    }
    let answer = connection.call(&tool, arguments).await;
    let taken = match &answer {
        Ok(answer) if options.take => connection.take_files(&tool, answer, None).await,
        _ => Vec::new(),
    };
    connection.close().await;
    let answer = answer?;
    match (options.format, &job) {
        (Format::Json, None) => print_json(&json!({"answer": answer, "card": card})),
        (Format::Json, Some(job)) => print_json(&json!({
            "answer": answer,
            "card": card,
            "job": job.dir(),
            "disclosures": heard.disclosures(),
            "degradations": heard.degradations(),
            "taken": taken,
        })),
        (Format::Text, _) => {
            out!("{}", render::answer(&answer));
            if let Some(job) = &job {
                out!("{}", render::job(job, &heard, &taken));
            }
        }
    }
    Ok(match answer.failure() {
        None => ExitCode::SUCCESS,
        Some(failure) => ExitCode::from(exit_status::of_failed_call(&failure.code)),
    })
}
