"""A real single-node SLURM cluster for tests: start and stop it by PID, as root, no systemd.

Installs nothing: it needs Debian's `slurm-wlm slurmctld slurmd munge` (and `slurmdbd
mariadb-server` for accounting), which `make slurm-deps` installs. Everything the cluster
writes lives in one state folder (configuration, spool, logs, PID files, MariaDB's data).
Clients find it through /etc/slurm/slurm.conf, a symbolic link to STATE/etc/slurm.conf made
at start and removed at stop (SLURM_CONF alone is not enough: snakemake-executor-plugin-slurm
deletes every SLURM_* variable inside its jobs). A real slurm.conf there is never touched:
start refuses instead.

    python tests/slurm/slurmcluster.py start STATE [--no-accounting] [--cpus 8]
    sinfo; sbatch -p testq --wrap hostname        # use it
    python tests/slurm/slurmcluster.py stop STATE

With accounting (the default, as real sites have it) MariaDB and slurmdbd run too, so `sacct`
(snakemake-executor-plugin-slurm's default status command) works. Without it, `sacct` fails
and the plugin must be told `--slurm-status-command squeue` (MinJobAge is 600 s here, enough
for squeue to still see finished jobs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PARTITION = "testq"  # deliberately not a default partition: a job must name it
CLUSTER = "minitest"
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
DB_USER, DB_PASS = "slurm", "test-only"
NEEDED = {"munged": "munge", "mungekey": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd",
          "sbatch": "slurm-client", "sacct": "slurm-client"}
NEEDED_ACCOUNTING = {"slurmdbd": "slurmdbd", "mariadbd": "mariadb-server",
                     "mysql_install_db": "mariadb-server", "mariadb": "mariadb-client"}


class ClusterError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_programs(accounting: bool = True) -> list[str]:
    """Debian packages whose programs are not on this machine (empty when all are there)."""
    need = dict(NEEDED, **(NEEDED_ACCOUNTING if accounting else {}))
    return sorted({pkg for prog, pkg in need.items() if not _which(prog)})


def _which(prog: str) -> str | None:
    return shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/usr/bin:/sbin")


class Cluster:
    """One single-node SLURM cluster whose whole state lives under `state`."""

    def __init__(self, state: str | Path, accounting: bool = True, cpus: int = 8):
        self.state = Path(state).resolve()
        self.accounting = accounting
        self.cpus = cpus
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.state / "etc" / "slurm.conf"
        self.pids = self.state / "pids"
        self.logs = self.state / "log"
        self.ports_file = self.state / "ports.json"

    # ---- what clients need ---------------------------------------------------------
    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        r = subprocess.run(list(cmd), capture_output=True, text=True, env=self.env(), timeout=timeout)
        if check and r.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        return r

    def jobs(self) -> list[dict[str, str]]:
        """The controller's record of every job (sacct with accounting, else scontrol)."""
        if self.accounting:
            out = self.run("sacct", "-X", "-a", "-P", "-n", "-S", "2000-01-01",
                           "-o", "JobIDRaw,JobName,Partition,State,AllocCPUS,ReqMem,Comment").stdout
            keys = ["id", "name", "partition", "state", "cpus", "mem", "comment"]
            return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.strip()]
        out = self.run("scontrol", "-o", "show", "job").stdout
        rows = []
        for line in out.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if f:
                rows.append({"id": f.get("JobId", ""), "name": f.get("JobName", ""),
                             "partition": f.get("Partition", ""), "state": f.get("JobState", ""),
                             "cpus": f.get("NumCPUs", ""), "mem": f.get("MinMemoryNode", ""),
                             "comment": f.get("Comment", "")})
        return rows

    def queue(self) -> list[dict[str, str]]:
        """Jobs pending or running now (squeue)."""
        out = self.run("squeue", "-h", "-o", "%i|%j|%T").stdout
        return [dict(zip(["id", "name", "state"], line.split("|"))) for line in out.splitlines() if line.strip()]

    def kill_job_processes(self, job_id: str) -> int:
        """SIGKILL every process of a running job on this (single) node, as the OOM killer or
        a crashing node does: the job ends FAILED. (`scancel` ends it "CANCELLED by UID",
        a state snakemake-executor-plugin-slurm 2.8.0 does not recognise: README.) Returns
        how many processes were killed."""
        killed = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"SLURM_JOB_ID={job_id}".encode() in environ:
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        return killed

    # ---- start -----------------------------------------------------------------------
    def start(self, timeout: float = 120) -> "Cluster":
        missing = missing_programs(self.accounting)
        if missing:
            raise ClusterError(f"SLURM test cluster needs Debian packages {' '.join(missing)} "
                               "(make slurm-deps installs them)")
        if os.geteuid() != 0:
            raise ClusterError("the SLURM test cluster runs its daemons as root")
        self._stop_leftover()
        for d in ("etc", "pids", "log", "munge", "ctld", "spool", "run"):
            (self.state / d).mkdir(parents=True, exist_ok=True)
        ports = {"ctld": _free_port(), "slurmd": _free_port(), "dbd": _free_port(), "db": _free_port()}
        self.ports_file.write_text(json.dumps(ports))
        try:
            self._start_munge()
            if self.accounting:
                self._start_accounting(ports, timeout)
            self._write_slurm_conf(ports)
            self._link_system_conf()
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: "UP" in self.run("scontrol", "ping", check=False).stdout, timeout, "slurmctld")
            self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", self.node])
            self._wait(self._node_ready, timeout, "slurmd (node idle)")
        except BaseException:
            self.stop()
            raise
        return self

    def _link_system_conf(self) -> None:
        if SYSTEM_CONF.exists() and not SYSTEM_CONF.is_symlink():
            raise ClusterError(f"{SYSTEM_CONF} is a real SLURM configuration; not starting a test cluster here")
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SYSTEM_CONF.is_symlink():
            SYSTEM_CONF.unlink()
        SYSTEM_CONF.symlink_to(self.conf)

    def _stop_leftover(self) -> None:
        """Stop a test cluster that an interrupted session left running (found by its symlink)."""
        if SYSTEM_CONF.is_symlink():
            old = Path(os.readlink(SYSTEM_CONF)).parent.parent
            if old != self.state and (old / "pids").is_dir():
                Cluster(old).stop()

    def _node_ready(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.split()
        return bool(out) and all(s in ("idle", "mix", "alloc") for s in out)

    def _spawn(self, name: str, cmd: list[str]) -> int:
        log = open(self.logs / f"{name}.out", "ab")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self.env(), start_new_session=True, cwd=self.state)
        log.close()
        (self.pids / f"{name}.pid").write_text(str(proc.pid))
        time.sleep(0.1)
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited at once ({proc.returncode}); see {self.logs / (name + '.out')}")
        return proc.pid

    def _wait(self, ready, timeout: float, what: str) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                if ready():
                    return
            except (ClusterError, subprocess.TimeoutExpired, OSError):
                pass
            time.sleep(0.2)
        raise ClusterError(f"{what} did not come up in {timeout:.0f} s; logs in {self.logs}")

    def _start_munge(self) -> None:
        key = self.state / "munge" / "munge.key"
        if not key.exists():
            subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        key.chmod(0o600)
        sock = self.state / "munge" / "munge.sock"
        self._spawn("munged", [_which("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={self.state / 'run' / 'munged.pid'}",
                               f"--seed-file={self.state / 'munge' / 'seed'}",
                               f"--log-file={self.logs / 'munged.log'}"])
        self._wait(sock.exists, 30, "munged")

    def _start_accounting(self, ports: dict[str, int], timeout: float) -> None:
        data = self.state / "mysql"
        sock = self.state / "run" / "mysqld.sock"
        if not (data / "mysql").is_dir():
            subprocess.run([_which("mysql_install_db"), f"--datadir={data}", "--user=root",
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           check=True, capture_output=True)
        self._spawn("mariadbd", [_which("mariadbd"), "--no-defaults", "--user=root", f"--datadir={data}",
                                 f"--socket={sock}", f"--port={ports['db']}", "--bind-address=127.0.0.1",
                                 f"--pid-file={self.state / 'run' / 'mariadbd.pid'}",
                                 f"--log-error={self.logs / 'mariadbd.log'}"])
        sql = (f"CREATE USER IF NOT EXISTS '{DB_USER}'@'localhost' IDENTIFIED BY '{DB_PASS}';"
               f"CREATE USER IF NOT EXISTS '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASS}';"
               f"GRANT ALL ON slurm_acct_db.* TO '{DB_USER}'@'localhost';"
               f"GRANT ALL ON slurm_acct_db.* TO '{DB_USER}'@'127.0.0.1';")
        mariadb = [_which("mariadb"), "--no-defaults", f"--socket={sock}", "-uroot"]
        self._wait(lambda: subprocess.run([*mariadb, "-e", "SELECT 1"], capture_output=True).returncode == 0,
                   timeout, "MariaDB")
        subprocess.run([*mariadb, "-e", sql], check=True, capture_output=True)
        dbd = self.state / "etc" / "slurmdbd.conf"
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.state / 'munge' / 'munge.sock'}",
            "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={ports['dbd']}", "SlurmUser=root",
            f"PidFile={self.state / 'run' / 'slurmdbd.pid'}", f"LogFile={self.logs / 'slurmdbd.log'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={ports['db']}",
            f"StorageUser={DB_USER}", f"StoragePass={DB_PASS}", "StorageLoc=slurm_acct_db", ""]))
        dbd.chmod(0o600)
        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF; sacctmgr needs slurm.conf's address.
        self._write_slurm_conf(ports)
        self._spawn("slurmdbd", [_which("slurmdbd"), "-D"])
        self._wait(lambda: self.run("sacctmgr", "-i", "add", "cluster", CLUSTER, check=False).returncode == 0
                   or CLUSTER in self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster",
                                          check=False).stdout, timeout, "slurmdbd")

    def _write_slurm_conf(self, ports: dict[str, int]) -> None:
        mem = _real_memory()
        s = self.state
        lines = [
            f"ClusterName={CLUSTER}", f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={ports['ctld']}", f"SlurmdPort={ports['slurmd']}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={s / 'munge' / 'munge.sock'}",
            f"StateSaveLocation={s / 'ctld'}", f"SlurmdSpoolDir={s / 'spool'}",
            f"SlurmctldPidFile={s / 'run' / 'slurmctld.pid'}", f"SlurmdPidFile={s / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.logs / 'slurmctld.log'}", f"SlurmdLogFile={self.logs / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            # Lets CPUs= exceed the real cores, so several 1-core jobs share a 2-core machine.
            "SlurmdParameters=config_overrides",
            "SchedulerType=sched/backfill", "MailProg=/bin/true", "ReturnToService=2",
            # squeue keeps finished jobs this long (the plugin's squeue mode needs >= 3x its interval).
            "MinJobAge=600", "KillWait=5", "InactiveLimit=0",
            "JobCompType=jobcomp/none",
        ]
        if self.accounting:
            lines += ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
                      f"AccountingStoragePort={ports['dbd']}", "AccountingStoreFlags=job_comment",
                      # the munge socket for connections to slurmdbd (sacct, sacctmgr, slurmctld)
                      f"AccountingStoragePass={s / 'munge' / 'munge.sock'}", "JobAcctGatherType=jobacct_gather/linux",
                      "JobAcctGatherFrequency=30"]
        else:
            lines += ["AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none"]
        lines += [f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={mem} State=UNKNOWN",
                  f"PartitionName={PARTITION} Nodes={self.node} Default=NO MaxTime=INFINITE State=UP", ""]
        self.conf.write_text("\n".join(lines))

    # ---- stop ------------------------------------------------------------------------
    def stop(self, timeout: float = 30) -> None:
        """Cancel every job, then stop the daemons in reverse start order, by PID."""
        if (self.pids / "slurmctld.pid").exists() and self.conf.exists():
            try:
                self.run("scancel", "--full", "-u", "root", check=False, timeout=10)
                t0 = time.monotonic()
                while self.queue() and time.monotonic() - t0 < timeout:
                    time.sleep(0.3)
            except (ClusterError, subprocess.TimeoutExpired, OSError):
                pass
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            pidfile = self.pids / f"{name}.pid"
            if not pidfile.exists():
                continue
            pid = int(pidfile.read_text())
            _terminate(pid, timeout)
            pidfile.unlink()
        if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == self.conf:
            SYSTEM_CONF.unlink()


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it
            if done:
                return
        except ChildProcessError:  # started by another process (the CLI): poll
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _real_memory() -> int:
    """MB that slurmd will accept as RealMemory (what `slurmd -C` reports, a little less)."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True).stdout
    for field in out.split():
        if field.startswith("RealMemory="):
            return int(int(field.split("=", 1)[1]) * 0.95)
    return 2000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("action", choices=["start", "stop"])
    p.add_argument("state", help="folder for the cluster's configuration, spool, logs and PID files")
    p.add_argument("--no-accounting", action="store_true", help="no MariaDB/slurmdbd (use squeue for status)")
    p.add_argument("--cpus", type=int, default=8, help="CPUs the node announces (may exceed the real cores)")
    a = p.parse_args(argv)
    c = Cluster(a.state, accounting=not a.no_accounting, cpus=a.cpus)
    try:
        if a.action == "start":
            c.start()
            print(f"SLURM cluster up ({SYSTEM_CONF} -> {c.conf}); partition {PARTITION}")
        else:
            c.stop()
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
