//! Maljan's conventions over MCP: how a tool's answer is read, the error envelope and its
//! codes, the capability manifest, the platform primitives and the `files` list.

mod answer;
mod error_code;
mod files;
mod job_key;
mod manifest;
mod primitives;

pub use answer::{Outcome, ToolAnswer, ToolFailure};
pub use error_code::ErrorCode;
pub use files::{FileRef, ResourceRef, files_in, resources_in};
pub use job_key::{JOB_KEY_META, JobKey, JobKeyError, MAX_JOB_KEY_CHARS, MIN_JOB_KEY_CHARS};
pub use manifest::{CapabilityManifest, FileReach, ToolCapability};
pub use primitives::{PLATFORM_PRIMITIVES, is_platform_primitive};
