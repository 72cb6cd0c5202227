//! Transfer progress bars, on a terminal only.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};
use maljan_client::ProgressReporter;

/// A reporter drawing one bar per transfer on stderr, or `None` when stderr is not a terminal.
pub(crate) fn terminal_reporter() -> Option<ProgressReporter> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let current: Arc<Mutex<Option<(String, ProgressBar)>>> = Arc::default();
    Some(ProgressReporter::new(move |p| {
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        // A file's name is a server's or a sample author's: shown with its controls escaped.
        let label =
            maljan_client::escape_controls(&format!("{} {}", p.direction, p.name)).into_owned();
        let bar = match &*current {
            Some((name, bar)) if *name == label => bar.clone(),
            _ => {
                if let Some((_, old)) = current.take() {
                    old.finish_and_clear();
                }
                let bar = ProgressBar::new(p.total.unwrap_or(0));
                bar.set_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_message(label.clone());
                *current = Some((label, bar.clone()));
                bar
            }
        };
        if let Some(total) = p.total {
            bar.set_length(total);
        }
        bar.set_position(p.done);
        if p.total.is_some_and(|t| p.done >= t) {
            bar.finish_and_clear();
        }
    }))
}
