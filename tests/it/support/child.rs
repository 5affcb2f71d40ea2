//! Child processes under a guard: every process a test spawns is killed and reaped when its guard drops, on a
//! failed assertion too, so that no test leaves a server (or nginx, or a shell) running behind it.

use std::ops::{Deref, DerefMut};
use std::process::{Child, Command};

/// A child process killed (SIGKILL) and reaped when dropped. It derefs to the [`Child`]: `try_wait`, `id`,
/// `stdout.take()`… work on it as on the child; a child that has already exited and been waited for is left alone.
pub(crate) struct KillOnDrop(Child);

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // std sends no signal to a child already reaped (`try_wait` returned its status), so a recycled pid is safe.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `Command::spawn` that returns the child under a [`KillOnDrop`] guard, and panics (naming the program) when it
/// cannot start. Tests spawn with this, never with `spawn()` (`hygiene.rs` checks).
pub(crate) trait SpawnGuarded {
    fn spawn_guarded(&mut self) -> KillOnDrop;
}

impl SpawnGuarded for Command {
    fn spawn_guarded(&mut self) -> KillOnDrop {
        let child = self.spawn().unwrap_or_else(|e| panic!("cannot start {:?}: {e}", self.get_program()));
        KillOnDrop(child)
    }
}
