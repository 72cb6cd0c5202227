//! The workspace README's examples hold: its pack is a valid pack. (Here rather than in
//! maljan-client, whose package holds no file outside its own directory.)

use maljan_client::Pack;

#[test]
fn the_readme_pack_example_is_a_valid_pack() {
    let readme = include_str!("../../../README.md");
    let start = readme
        .find("A pack is a TOML file of steps:\n\n```toml\n")
        .expect("the example");
    let block = &readme[start..];
    let body = &block[block.find("```toml\n").expect("fence") + 8..];
    let example = &body[..body.find("```").expect("end fence")];
    let pack = Pack::parse(example, "README.md").expect("the README's pack is valid");
    assert_eq!(pack.steps().len(), 3);
    assert!(pack.check_servers(["sidecar", "remote"]).is_ok());
}
