// Embedded migrations (`sqlx::migrate!`, from the repository's `migrations/`) must be rebuilt when a migration
// file is added.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
