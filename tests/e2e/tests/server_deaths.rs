//! A run over a stdio server that exits on its second call, with the cap at 1 and at 4:
//! every step that was not in flight at a death completes on the server started again, a
//! step that was in flight fails `connection_lost` and is not sent again, the restarts equal
//! the deaths, the breaker takes no death for an unanswered call, and past the last restart
//! the steps left fail once, naming how the server ended.
//!
//! The server logs every call it read (`received tools/call … tag=STEP`) and, as it dies,
//! every call already waiting on its stdin (`in flight at death: tag=STEP`): together, every
//! call that reached a process that died.

use std::collections::HashMap;
use std::sync::Arc;

use maljan_client::{
    BreakerSettings, ClientSettings, ConnectionContext, Job, Ledger, Pack, PackInfo, ReportBuilder,
    Run, RunEnd, RunReport, ServerCommand, ServerConfig, StepOutcome, StepStatus,
    distinct_failures,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

struct Deaths {
    outcomes: Vec<StepOutcome>,
    end: RunEnd,
    report: RunReport,
    ledger: MemorySink,
    _dir: tempfile::TempDir,
}

/// Runs a pack of `steps` steps, `s1`…, each calling `tool` once with its id as the tag, over
/// a server that dies on its second call, `cap` calls at once.
async fn run_dying(cap: u32, steps: usize, tool: &str) -> Deaths {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let mut settings = ClientSettings::default();
    settings.breaker = BreakerSettings {
        max_concurrent_calls: cap,
        unanswered_threshold: 1,
        ..BreakerSettings::default()
    };
    let ledger = MemorySink::default();
    let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::from(ledger.clone())));
    let servers = [ServerConfig::stdio(
        "dying",
        ServerCommand::new(SERVER).arg("--die-on-call").arg("2"),
    )];
    let heard = Arc::new(ReportBuilder::default());
    let run = Run::new(job.clone(), servers, settings, context).recording_to(heard.clone());
    let text: String = (1..=steps)
        .map(|i| {
            format!(
                "[[step]]\nid = \"s{i}\"\nserver = \"dying\"\ntool = \"{tool}\"\narguments = {{ tag = \"s{i}\", ms = 200 }}\n"
            )
        })
        .collect();
    let pack = Pack::parse(&text, "dying.toml").expect("pack");
    let outcomes = run.execute(&pack).await.expect("accepted");
    let end = run.finish().await;
    let report = heard.report(
        PackInfo {
            origin: "dying.toml".to_owned(),
            name: None,
        },
        &job,
        &end,
        false,
    );
    Deaths {
        outcomes,
        end,
        report,
        ledger,
        _dir: dir,
    }
}

/// What each process of the run did, from its stderr: the steps whose calls reached it, and
/// whether it died.
struct Process {
    reached: Vec<String>,
    died: bool,
}

fn processes(end: &RunEnd) -> Vec<Process> {
    end.servers[0]
        .connections
        .iter()
        .map(|c| Process {
            reached: c
                .stderr_tail
                .lines()
                .filter(|l| {
                    l.starts_with("received tools/call") || l.starts_with("in flight at death")
                })
                .filter_map(|l| l.split_once("tag=").map(|(_, tag)| tag.to_owned()))
                .collect(),
            died: c.stderr_tail.contains("dying on call 2"),
        })
        .collect()
}

/// The invariants every run over the dying server keeps, whatever the timing; returns the
/// number of deaths.
fn check_deaths(deaths: &Deaths) -> usize {
    let processes = processes(&deaths.end);
    let mut reached: HashMap<&str, Vec<bool>> = HashMap::new();
    for process in &processes {
        for step in &process.reached {
            reached.entry(step).or_default().push(process.died);
        }
    }
    for outcome in &deaths.outcomes {
        let got = reached
            .get(outcome.step.as_str())
            .cloned()
            .unwrap_or_default();
        assert!(
            got.len() <= 1,
            "{} was sent again after it reached a server: {got:?}",
            outcome.step
        );
        match &outcome.status {
            StepStatus::Completed => {
                assert_eq!(got.len(), 1, "{} completed on one server", outcome.step);
            }
            StepStatus::Failed { failure } if failure.code == ErrorCode::ConnectionLost => {
                // A call written to the pipe as the server exited, after it looked for the
                // last time, reached no process, yet was in flight: no one can send it again
                // knowing it did no harm.
                assert!(
                    got == [true] || got.is_empty(),
                    "{} failed connection_lost, so it was in flight at a death: {got:?}: {}",
                    outcome.step,
                    failure.message
                );
            }
            StepStatus::Failed { failure } => {
                assert!(
                    failure.message.contains("is not started again"),
                    "{}: only the steps past the last restart fail otherwise: {failure:?}",
                    outcome.step
                );
                assert!(got.is_empty(), "{} never reached a server", outcome.step);
            }
            other => panic!("{}: {other:?}", outcome.step),
        }
    }
    let died = processes.iter().filter(|p| p.died).count();
    let server = &deaths.report.servers[0];
    assert_eq!(server.losses.len(), died, "each death in the report");
    // Every death is followed by a restart, but one that left no step to call the server,
    // and the last one past the restarts allowed.
    let last_died = processes.last().is_some_and(|p| p.died);
    let restarts = server.restarts as usize;
    assert_eq!(restarts, processes.len() - 1);
    assert!(
        restarts == died || (last_died && restarts == died - 1),
        "restarts equal the deaths: {restarts} restarts, {died} deaths"
    );
    for loss in &server.losses {
        assert_eq!(loss.exit.as_deref(), Some("exit status: 3"), "{loss:?}");
        assert!(loss.stderr_tail.contains("dying on call 2"), "{loss:?}");
    }
    assert!(
        deaths.outcomes.iter().all(|o| !matches!(
            &o.status,
            StepStatus::Failed { failure } if failure.code == ErrorCode::ServerResting
        )),
        "the breaker took no death for an unanswered call (its threshold is 1)"
    );
    // The ledger has each call made once: a call lost before it was sent is ledgered when
    // it is made again.
    let mut ledgered: Vec<String> = deaths
        .ledger
        .entries()
        .iter()
        .filter(|e| e.call.tool != "capabilities")
        .filter_map(|e| e.call.scope.step.clone())
        .collect();
    ledgered.sort();
    let mut made: Vec<String> = deaths
        .outcomes
        .iter()
        .filter(|o| {
            !matches!(&o.status, StepStatus::Failed { failure }
                if failure.code != ErrorCode::ConnectionLost)
        })
        .map(|o| o.step.clone())
        .collect();
    made.sort();
    assert_eq!(ledgered, made);
    died
}

fn count(outcomes: &[StepOutcome], completed: bool) -> usize {
    outcomes
        .iter()
        .filter(|o| (o.status == StepStatus::Completed) == completed)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_at_a_time_every_step_not_in_flight_completes_on_a_restarted_server() {
    let deaths = run_dying(1, 5, "echo").await;
    assert_eq!(check_deaths(&deaths), 2);
    assert_eq!(count(&deaths.outcomes, true), 3, "{:#?}", deaths.outcomes);
    assert_eq!(count(&deaths.outcomes, false), 2);
    assert_eq!(deaths.end.servers[0].restarts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_calls_at_once_only_the_calls_in_flight_at_a_death_fail() {
    let deaths = run_dying(4, 5, "slow").await;
    // Which calls were written before a death is the pipe's timing; the invariants hold
    // whatever it was.
    let died = check_deaths(&deaths);
    assert!(died >= 1, "the server died on its second call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_last_restart_the_steps_left_fail_once_naming_the_exit() {
    let deaths = run_dying(1, 8, "echo").await;
    assert_eq!(check_deaths(&deaths), 3);
    assert_eq!(deaths.end.servers[0].restarts, 2);
    let gave_up: Vec<_> = distinct_failures(&deaths.outcomes)
        .into_iter()
        .filter(|f| f.failure.code != ErrorCode::ConnectionLost)
        .collect();
    assert_eq!(gave_up.len(), 1, "one distinct failure: {gave_up:#?}");
    assert_eq!(gave_up[0].count, 2);
    let message = &gave_up[0].failure.message;
    assert!(message.contains("was lost 3 times"), "{message}");
    assert!(message.contains("ended with exit status: 3"), "{message}");
    assert!(message.contains("dying on call 2"), "{message}");
}
