//! Stand-ins for the container runtime's tools on a capictl node, so that the Docker
//! provider's exec contract holds as on `kindest/node`: `crictl ps` lists the static pods'
//! processes (from the agent's `/run/capictl/pods.json`), `ctr images import -` accepts and
//! discards an image (nothing here runs images).

use std::io::Read as _;
use std::process::ExitCode;

use super::Layout;
use super::agent::PodState;

/// `crictl`: `ps` lists the running static pods; everything else succeeds quietly.
pub fn crictl(args: &[String]) -> ExitCode {
    if args.first().map(String::as_str) != Some("ps") {
        return ExitCode::SUCCESS;
    }
    let all = args.iter().any(|a| a == "-a" || a == "--all");
    let states: Vec<PodState> = std::fs::read(Layout::from_env().run().join("pods.json"))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default();
    println!("CONTAINER\tIMAGE\tSTATE\tNAME\tATTEMPT\tPOD");
    for s in states.iter().filter(|s| all || s.pid.is_some()) {
        let state = if s.pid.is_some() { "Running" } else { "Exited" };
        println!(
            "{}\t{}\t{state}\t{}\t{}\t{}",
            s.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            s.image,
            s.container,
            s.restart_count,
            s.name
        );
    }
    ExitCode::SUCCESS
}

/// `ctr`: `images import` reads the image from stdin and drops it.
pub fn ctr(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "import") {
        let mut sink = std::io::sink();
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 1 << 16];
        let mut total = 0usize;
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            let _ = std::io::Write::write_all(&mut sink, &buf[..n]);
        }
        println!("unpacking nothing: capictl nodes run no images ({total} bytes read)");
    }
    ExitCode::SUCCESS
}
