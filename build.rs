// Embedded migrations (`sqlx::migrate!`) must be rebuilt when a migration file is added.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
