//! The harness itself: both binaries start with every port chosen by the OS, answer, and
//! their memory and open files can be read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use shepherd_hostile_tests::{Process, backends, config_file, endpoint_lines};

#[tokio::test]
async fn both_binaries_start_and_are_measurable() {
    let servers = backends(1).await;
    let config = config_file(&format!("endpoints:\n{}", endpoint_lines(&servers)));
    let gateway = Process::gateway(&config, &[]).await;
    let epp = Process::epp(&config, &[]).await;
    for (process, admin) in [(&gateway, gateway.addr("admin")), (&epp, epp.addr("admin"))] {
        let answer = reqwest::get(format!("http://{admin}/healthz"))
            .await
            .unwrap();
        assert!(answer.status().is_success());
        assert!(process.rss_kib() > 0);
        assert!(process.open_files() > 0);
    }
    epp.addr("extproc");
    gateway.addr("http");
}
