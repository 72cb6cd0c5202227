//! How `maljan` ends: one status per kind of ending, so a script can tell them apart
//! without reading messages. `maljan --help` and the README list them.

use std::process::ExitCode;

use maljan_mcp_proto::maljan::ErrorCode;

use crate::error::CliError;

/// Everything asked was done.
pub(crate) const SUCCESS: u8 = 0;
/// The tool answered, with a failure of its own (its code and remedy are printed).
pub(crate) const TOOL_ERROR: u8 = 1;
/// The command line is wrong: an unknown option, a malformed or mistyped argument, an
/// unknown tool, a pack refused before anything ran.
pub(crate) const USAGE: u8 = 2;
/// A run went through with less: some steps failed or were skipped, at least one completed.
pub(crate) const RUN_DEGRADED: u8 = 3;
/// A run's steps all failed.
pub(crate) const RUN_FAILED: u8 = 4;
/// The configuration is not usable: the config file, an unknown server name, a missing
/// token, a ledger or job directory that cannot be written.
pub(crate) const CONFIGURATION: u8 = 5;
/// The server could not be started or reached, or its set-up failed.
pub(crate) const SERVER_UNUSABLE: u8 = 6;
/// The call got no answer: none within the wait, the connection was lost, or the server is
/// busy or resting after unanswered calls (try again later).
pub(crate) const UNANSWERED: u8 = 7;
/// This host failed maljan: its own executable, a signal handler, output it could not make.
pub(crate) const HOST: u8 = 8;
/// The fleet's stores (PostgreSQL, the object store) could not be reached or refused.
pub(crate) const STORE_UNUSABLE: u8 = 9;
/// Stopped by Ctrl-C or SIGTERM: 128 + SIGINT, as shells report it.
pub(crate) const INTERRUPTED: u8 = 130;

/// The statuses as `--help` shows them.
pub(crate) const HELP: &str = "Exit status: 0 done; 1 the tool answered with a failure; 2 usage \
(a wrong argument, an unknown tool, a refused pack); 3 run degraded; 4 run failed; 5 \
configuration; 6 server unreachable or its set-up failed; 7 unanswered (timed out, connection \
lost, server busy or resting); 8 a failure of this host; 9 the fleet's store unreachable or refusing; 130 interrupted; 141 the reader of \
the output went away (a broken pipe).";

/// The status of a call's answer that failed with `code`.
pub(crate) fn of_failed_call(code: &ErrorCode) -> u8 {
    match code {
        ErrorCode::Unanswered
        | ErrorCode::ConnectionLost
        | ErrorCode::ServerBusy
        | ErrorCode::ServerResting => UNANSWERED,
        _ => TOOL_ERROR,
    }
}

impl CliError {
    /// The status `maljan` ends with when this stops it.
    pub(crate) fn exit_status(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::BadArgument { .. } => USAGE,
            CliError::Config { .. }
            | CliError::UnknownServer { .. }
            | CliError::Ledger(_)
            | CliError::Job { .. }
            | CliError::NoStore
            | CliError::Login { .. } => CONFIGURATION,
            CliError::Fleet(fleet) if fleet.is_settings() => CONFIGURATION,
            CliError::Fleet(_) => STORE_UNUSABLE,
            CliError::Client(client) if client.is_refused_tool() => USAGE,
            CliError::Client(client) if client.is_setup_failed() || client.is_unreachable() => {
                SERVER_UNUSABLE
            }
            CliError::Client(_) => CONFIGURATION,
            CliError::OwnExecutable(_)
            | CliError::Signals(_)
            | CliError::Output(_)
            | CliError::Demo(_)
            | CliError::Index { .. }
            | CliError::Sidecar(_) => HOST,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_got_no_answer_is_told_from_a_tools_failure() {
        for code in [
            ErrorCode::Unanswered,
            ErrorCode::ConnectionLost,
            ErrorCode::ServerBusy,
            ErrorCode::ServerResting,
        ] {
            assert_eq!(of_failed_call(&code), UNANSWERED, "{code:?}");
        }
        for code in [
            ErrorCode::NoSuchFile,
            ErrorCode::ToolFailed,
            ErrorCode::Timeout,
        ] {
            assert_eq!(of_failed_call(&code), TOOL_ERROR, "{code:?}");
        }
    }

    #[test]
    fn the_help_names_every_status() {
        for status in [
            SUCCESS,
            TOOL_ERROR,
            USAGE,
            RUN_DEGRADED,
            RUN_FAILED,
            CONFIGURATION,
            SERVER_UNUSABLE,
            UNANSWERED,
            HOST,
            STORE_UNUSABLE,
            INTERRUPTED,
        ] {
            assert!(HELP.contains(&format!("{status} ")), "{status}");
        }
    }
}
