//! The dump importer (`espalier import`, `migrate`): any bytes as a dump into an empty
//! database with the demo schema, in a transaction that is always rolled back, so the
//! database stays empty for the next input. An import that succeeds leaves a graph that
//! `espalier check` finds whole (nothing half-applied). Otherwise only a panic, a hang or a
//! crash fails.
#![no_main]

use std::sync::OnceLock;

use espalier_data::{DumpError, WriteGraph};
use espalier_fuzz::demo_engine;
use espalier_instruction::Engine;
use espalier_transaction::TxError;
use libfuzzer_sys::fuzz_target;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| demo_engine("dump_import", false))
}

/// The closure's error: the import's, or the rollback signal.
#[derive(Debug)]
enum Stop {
    RolledBack,
    Tx(#[allow(dead_code)] TxError),
    /// What the write queue checks when a request ends (integrity, unique indexes).
    Data(#[allow(dead_code)] espalier_data::DataError),
}

impl From<TxError> for Stop {
    fn from(e: TxError) -> Stop {
        Stop::Tx(e)
    }
}

impl From<espalier_data::DataError> for Stop {
    fn from(e: espalier_data::DataError) -> Stop {
        Stop::Data(e)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut outcome: Option<Result<(), DumpError>> = None;
    let result = engine().database().write(|g: &mut WriteGraph<'_, '_>| -> Result<(), Stop> {
        let imported = espalier_data::import(g, data, &mut |_| {});
        outcome = Some(match imported {
            Ok(_) => {
                let report = espalier_data::check(&g.graph(), &mut |_| {}).expect("the check reads");
                assert!(report.is_ok(), "an accepted dump left problems: {:?}", report.problems);
                Ok(())
            }
            Err(e) => Err(e),
        });
        Err(Stop::RolledBack)
    });
    match result {
        Err(Stop::RolledBack) => {}
        other => panic!("the rolled-back import ended as {other:?}"),
    }
    if let Some(Err(e)) = outcome {
        let _ = e.to_string();
    }
});
