//! How each type of `report.json` v1 is made from the run's runtime types: the one place
//! where the two meet, so that a change on either side shows here.

use maljan_mcp_proto::maljan::ToolFailure;
use maljan_mcp_proto::mcp::Era;
use maljan_mcp_transport::TransportCounts;
use maljan_staging::{Disclosed, DisclosureOutcome, UploadMode};

use super::{
    Card, Counts, Degradation, Disclosure, DistinctFailure, Failure, Handed, Loss, Mode, Sent,
    Server, ServerInfo, Step, StepStatus, Taken, Tool, UnavailableTool, Upload,
};
use crate::card::{CardTool, ServerCard};
use crate::job::TakenFile;
use crate::outcome::{ServerLoss, StepOutcome};

impl From<&ToolFailure> for Failure {
    fn from(failure: &ToolFailure) -> Self {
        Failure {
            code: failure.code.as_str().to_owned(),
            message: failure.message.clone(),
            remediation: failure.remediation.clone(),
        }
    }
}

impl From<&crate::outcome::DistinctFailure> for DistinctFailure {
    fn from(failure: &crate::outcome::DistinctFailure) -> Self {
        DistinctFailure {
            server: failure.server.clone(),
            failure: Failure::from(&failure.failure),
            count: failure.count,
            steps: failure.steps.clone(),
        }
    }
}

impl From<TransportCounts> for Counts {
    fn from(c: TransportCounts) -> Self {
        Counts {
            messages: c.messages,
            stray: c.stray,
            invalid: c.invalid,
            oversized: c.oversized,
            salvaged: c.salvaged,
            blank: c.blank,
            unmatched: c.unmatched,
        }
    }
}

impl From<&CardTool> for Tool {
    fn from(tool: &CardTool) -> Self {
        Tool {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.clone(),
            available: tool.available,
        }
    }
}

impl From<&crate::card::UnavailableTool> for UnavailableTool {
    fn from(tool: &crate::card::UnavailableTool) -> Self {
        UnavailableTool {
            name: tool.name.clone(),
            reason: tool.reason.clone(),
            remediation: tool.remediation.clone(),
            without: tool.without.clone(),
        }
    }
}

impl From<&ServerCard> for Card {
    fn from(card: &ServerCard) -> Self {
        Card {
            server: card.server.clone(),
            server_info: ServerInfo {
                name: card.server_info.name.clone(),
                version: card.server_info.version.clone(),
                title: card.server_info.title.clone(),
            },
            protocol_version: card.protocol_version.clone(),
            // The words of schema version 1, from before the eras were named by what they are.
            era: match card.era {
                Era::Stateless => "modern",
                _ => "legacy",
            }
            .to_owned(),
            tools: card.tools.iter().map(Tool::from).collect(),
            unavailable: card.unavailable.iter().map(UnavailableTool::from).collect(),
            primitives: card.primitives.clone(),
            manifest: card
                .manifest
                .as_ref()
                .and_then(|m| serde_json::to_value(m).ok()),
            manifest_error: card.manifest_error.clone(),
            transport: card.transport.to_owned(),
            stdout: card.stdout.into(),
        }
    }
}

impl From<&ServerLoss> for Loss {
    fn from(loss: &ServerLoss) -> Self {
        Loss {
            exit: loss.exit.clone(),
            failure: loss.failure.clone(),
            stderr_tail: loss.stderr_tail.clone(),
        }
    }
}

impl From<&crate::run::ServerRecord> for Server {
    fn from(record: &crate::run::ServerRecord) -> Self {
        Server {
            server: record.server.clone(),
            card: record.card.as_ref().map(Card::from),
            restarts: record.restarts,
            losses: record.losses.iter().map(Loss::from).collect(),
            last_failure: record.last_failure.clone(),
            connections: record.connections.iter().map(|c| c.counts.into()).collect(),
        }
    }
}

impl From<&crate::outcome::StepStatus> for StepStatus {
    fn from(status: &crate::outcome::StepStatus) -> Self {
        match status {
            crate::outcome::StepStatus::Completed => StepStatus::Completed,
            crate::outcome::StepStatus::Failed { failure } => StepStatus::Failed {
                failure: failure.into(),
            },
            crate::outcome::StepStatus::Skipped { reason } => StepStatus::Skipped {
                reason: reason.clone(),
            },
        }
    }
}

impl From<&TakenFile> for Taken {
    fn from(file: &TakenFile) -> Self {
        match file {
            TakenFile::Taken {
                server,
                path,
                sha256,
                size,
            } => Taken::Taken {
                server: server.clone(),
                path: path.clone(),
                sha256: sha256.clone(),
                size: *size,
            },
            TakenFile::NotTaken {
                server,
                path,
                reason,
            } => Taken::NotTaken {
                server: server.clone(),
                path: path.clone(),
                words: reason.clone(),
            },
        }
    }
}

impl From<&StepOutcome> for Step {
    fn from(outcome: &StepOutcome) -> Self {
        Step {
            step: outcome.step.clone(),
            instance: outcome.instance.clone(),
            server: outcome.server.clone(),
            tool: outcome.tool.clone(),
            arguments: outcome.arguments.clone(),
            resolved: outcome.resolved.clone(),
            sent_arguments: outcome.sent_arguments.clone(),
            status: (&outcome.status).into(),
            answer: outcome.answer.clone(),
            taken: outcome.taken.iter().map(Taken::from).collect(),
            handed: outcome
                .handed
                .iter()
                .map(|h| Handed {
                    name: h.name.clone(),
                    path: h.path.clone(),
                    sha256: h.sha256.clone(),
                })
                .collect(),
            duration_ms: outcome.duration_ms,
            queued_ms: outcome.queued_ms,
        }
    }
}

impl From<&maljan_staging::Disclosure> for Disclosure {
    fn from(d: &maljan_staging::Disclosure) -> Self {
        Disclosure {
            server: d.server.clone(),
            what: match &d.what {
                Disclosed::Sample => Sent::Sample,
                Disclosed::ToolOutput { step, tool } => Sent::ToolOutput {
                    step: step.clone(),
                    tool: tool.clone(),
                },
                Disclosed::JobFile => Sent::JobFile,
            },
            needed_by: d.needed_by.clone(),
            name: d.name.clone(),
            size: d.size,
            sha256: d.sha256.clone(),
            mode: match d.mode {
                UploadMode::Chunked => Mode::Chunked,
                UploadMode::Single => Mode::Single,
            },
            // An upload still under way when the report is made was cut short.
            outcome: match &d.outcome {
                DisclosureOutcome::Sent { remote_path } => Upload::Sent {
                    remote_path: remote_path.clone(),
                },
                DisclosureOutcome::Failed { reason } => Upload::Failed {
                    reason: reason.clone(),
                },
                _ => Upload::Interrupted,
            },
            duration_ms: d.duration_ms,
        }
    }
}

impl From<&maljan_staging::Degradation> for Degradation {
    fn from(d: &maljan_staging::Degradation) -> Self {
        Degradation {
            server: d.server.clone(),
            subject: d.subject.clone(),
            reason: d.reason.clone(),
        }
    }
}
