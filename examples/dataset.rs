//! Writes a reproducible synthetic data set as NDJSON for the write API (`PUT /api/v1/urls`):
//!
//! ```sh
//! cargo run --release --example dataset -- --rows 1000000 > urls.ndjson
//! curl -X PUT localhost:8080/api/v1/urls -H 'Content-Type: application/x-ndjson' --data-binary @urls.ndjson
//! ```

#[path = "../benches/support/dataset.rs"]
mod dataset;

use std::io::{BufWriter, Write};

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// How many records.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// The site's origin; must match the server's public_url.
    #[arg(long, default_value = "https://www.example.com")]
    origin: String,
    /// Seed of the generator: the same seed gives the same records.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    for record in dataset::records(&args.origin, args.rows, args.seed) {
        out.write_all(record.to_json().as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
