//! Any path, against any tree of symlinks: what is opened is a file beneath the root, or
//! nothing.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use maljan_confine::Root;
use proptest::prelude::*;

/// The regular files beneath `dir`, by identity, found without following any symlink.
fn files_beneath(dir: &Path, found: &mut HashSet<(u64, u64)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            files_beneath(&entry.path(), found);
        } else if meta.is_file() {
            found.insert((meta.dev(), meta.ino()));
        }
    }
}

/// Pieces paths and symlink targets are made of: names in the tree, the ways out of it,
/// and a few strings of no meaning.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just(String::new()),
        Just("f".to_owned()),
        Just("d".to_owned()),
        Just("l0".to_owned()),
        Just("l1".to_owned()),
        Just("l2".to_owned()),
        Just("outside".to_owned()),
        Just("secret".to_owned()),
        Just("proc".to_owned()),
        Just("self".to_owned()),
        Just("fd".to_owned()),
        Just("root".to_owned()),
        Just("etc".to_owned()),
        Just("passwd".to_owned()),
        "[a-z.\\\\/\u{0}-\u{1f}é]{0,6}",
    ]
}

/// A path made of pieces, absolute (at `/`, at the root's own path, or at the outside
/// directory's) or relative.
fn path() -> impl Strategy<Value = (u8, Vec<String>)> {
    (0u8..4, prop::collection::vec(piece(), 0..6))
}

fn spell(start: u8, pieces: &[String], root: &Path, outside: &Path) -> String {
    let joined = pieces.join("/");
    match start {
        0 => joined,
        1 => format!("/{joined}"),
        2 => format!("{}/{joined}", root.display()),
        _ => format!("{}/{joined}", outside.display()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn what_is_opened_is_always_a_file_beneath_the_root(
        links in prop::collection::vec((0u8..3, path()), 0..6),
        named in prop::collection::vec(path(), 1..12),
    ) {
        let top = tempfile::tempdir().unwrap();
        let root_dir = top.path().join("root");
        let outside = top.path().join("outside");
        std::fs::create_dir_all(root_dir.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root_dir.join("f"), "inside").unwrap();
        std::fs::write(root_dir.join("d/f"), "inside too").unwrap();
        std::fs::write(outside.join("secret"), "secret").unwrap();
        for (i, (at, (start, pieces))) in links.iter().enumerate() {
            let place = match at {
                0 => root_dir.join(format!("l{i}")),
                1 => root_dir.join("d").join(format!("l{i}")),
                _ => outside.join(format!("l{i}")),
            };
            let target = spell(*start, pieces, &root_dir, &outside);
            let _ = std::os::unix::fs::symlink(target, place);
        }
        let root = Root::open(&root_dir).unwrap();
        let mut inside = HashSet::new();
        files_beneath(root.path(), &mut inside);
        for (start, pieces) in &named {
            let name = spell(*start, pieces, root.path(), &outside);
            if let Ok(file) = root.open_file(&name) {
                let meta = file.metadata().unwrap();
                prop_assert!(
                    inside.contains(&(meta.dev(), meta.ino())),
                    "{name:?} opened a file that is not beneath the root"
                );
            }
        }
    }
}
