"""A three-host Slurm cluster on one machine, in network namespaces (iproute2), for the kit's cluster
path: a controller and two compute nodes, each with its own address, munged, Slurm daemon, spool and
podman store; one munge key; a registry served on the controller's address.

    sudo python -m tests.support.nscluster start DIR   # prints the variables to use it
    sudo python -m tests.support.nscluster stop DIR

The hosts:

- three network namespaces (``<prefix>-ctl``, ``-n1``, ``-n2``), joined by veth links to a bridge that
  lives in the controller's namespace; addresses in ``10.213.<n>.0/24``, which only these namespaces
  own. No namespace has a default route: nothing they send can leave them.
- each host in its own mount and UTS namespace as well (``unshare``), so each has its own hostname,
  its own ``/etc/containers`` (a podman store, its registries.conf), ``/var/lib/containers``,
  ``/dev/shm`` and munge socket folder: bind mounts that exist only inside that host and vanish with
  its last process.
- the controller runs munged, slurmctld and ``docker-registry`` (on ``10.213.<n>.1:5000``, its data in
  DIR/registry); each node runs munged and ``slurmd -N <node>``. One slurm.conf serves all
  (``%n`` in the node paths), with ``NodeName``/``NodeAddr`` per node and one CPU each, so an array
  of two or more tasks lands on both nodes.

Everything is started in the namespaces and stopped by process id: :meth:`Cluster.stop` kills every
process in each namespace (``ip netns pids``), then deletes the namespaces, which takes their veths,
the bridge and their mounts with them. :func:`leftovers` says what of a cluster is still on the
machine (namespaces, links, mounts, processes): nothing, after ``stop``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

NODES = ("n1", "n2")
REGISTRY_PORT = 5000
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
NEEDED = {
    "ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux", "munged": "munge",
    "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sbatch": "slurm-wlm", "podman": "podman",
    "docker-registry": "docker-registry", "iptables": "iptables",
}  # fmt: skip


class ClusterError(RuntimeError):
    pass


def missing_tools() -> list[str]:
    """``binary (apt-get install package)`` for each binary the cluster needs that is not installed."""
    return [f"{b} (apt-get install {p})" for b, p in NEEDED.items() if shutil.which(b) is None]


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {(proc.stderr or proc.stdout).strip()}")
    return proc


@dataclasses.dataclass
class Cluster:
    root: Path  # everything of the cluster's lives here (short: munge's socket path has a limit)
    prefix: str  # namespace and link names start with it
    subnet: int  # the third octet of 10.213.<subnet>.0/24

    # ---------------------------------------------------------------- names

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return f"10.213.{self.subnet}.{1 if host == 'ctl' else NODES.index(host) + 2}"

    def hostname(self, host: str) -> str:
        return f"xpk-{host}"

    @property
    def registry(self) -> str:
        return f"{self.address('ctl')}:{REGISTRY_PORT}"

    @property
    def slurm_conf(self) -> Path:
        return self.root / "slurm.conf"

    def node_dir(self, host: str) -> Path:
        return self.root / "hosts" / self.hostname(host)  # Slurm's %n: the node name

    @property
    def env(self) -> dict[str, str]:
        """What a client in the controller's namespace needs."""
        return {"SLURM_CONF": str(self.slurm_conf)}

    def save(self) -> None:
        (self.root / "cluster.json").write_text(json.dumps({"prefix": self.prefix, "subnet": self.subnet}) + "\n")

    @classmethod
    def load(cls, root: Path) -> Cluster:
        data = json.loads((root / "cluster.json").read_text())
        return cls(root, data["prefix"], int(data["subnet"]))

    # ---------------------------------------------------------------- running things in a host

    def exec_line(self, host: str, *cmd: str) -> list[str]:
        """``cmd`` in the host's network namespace (a client: the controller's login side). nsenter,
        not ``ip netns exec``: that one remounts /sys, hiding the cgroup filesystems slurmd and
        podman need."""
        return ["nsenter", f"--net=/run/netns/{self.ns(host)}", "--", *cmd]

    def enter_line(self, host: str, *cmd: str) -> list[str]:
        """``cmd`` inside the host itself (its network, mount and UTS namespaces, through its munged)."""
        pid = (self.node_dir(host) / "munged.pid").read_text().strip()
        return ["nsenter", "-t", pid, "-n", "-m", "-u", "--", *cmd]

    def pids(self, host: str) -> list[int]:
        proc = _run("ip", "netns", "pids", self.ns(host), check=False)
        return [int(p) for p in proc.stdout.split()]

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munge clients (the jobs) traverse it to the socket
        self.save()
        self._network()
        key = self.root / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        (self.root / "state").mkdir(exist_ok=True)
        (self.root / "munge").mkdir(mode=0o755, exist_ok=True)
        (self.root / "registry").mkdir(exist_ok=True)
        self._write_slurm_conf()
        for host in ("ctl", *NODES):
            self.start_host(host)
        self.wait_nodes(idle=NODES)

    def _network(self) -> None:
        bridge = "br0"
        for host in ("ctl", *NODES):
            _run("ip", "netns", "add", self.ns(host))
            _run("ip", "-n", self.ns(host), "link", "set", "lo", "up")
        ctl = self.ns("ctl")
        _run("ip", "-n", ctl, "link", "add", bridge, "type", "bridge")
        _run("ip", "-n", ctl, "addr", "add", f"{self.address('ctl')}/24", "dev", bridge)
        _run("ip", "-n", ctl, "link", "set", bridge, "up")
        for node in NODES:
            # Both ends are made inside their namespaces: no link ever appears in the machine's own.
            _run("ip", "link", "add", "eth0", "netns", self.ns(node), "type", "veth",
                 "peer", "name", f"to-{node}", "netns", ctl)  # fmt: skip
            _run("ip", "-n", ctl, "link", "set", f"to-{node}", "master", bridge, "up")
            _run("ip", "-n", self.ns(node), "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            _run("ip", "-n", self.ns(node), "link", "set", "eth0", "up")

    def _write_slurm_conf(self) -> None:
        ctl = self.hostname("ctl")
        nodes = "\n".join(f"NodeName={self.hostname(n)} NodeAddr={self.address(n)} CPUs=1 State=UNKNOWN" for n in NODES)
        names = ",".join(self.hostname(n) for n in NODES)
        hosts = self.root / "hosts"
        self.slurm_conf.write_text(f"""# Written by tests/support/nscluster.py: a controller, two nodes, namespaces.
ClusterName=xpukitns
SlurmctldHost={ctl}({self.address("ctl")})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.root}/munge/munge.sock
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
StateSaveLocation={self.root}/state
SlurmdSpoolDir={hosts}/%n/spool
SlurmctldPidFile={hosts}/{ctl}/slurmctld.pid
SlurmdPidFile={hosts}/%n/slurmd.pid
SlurmctldLogFile={hosts}/{ctl}/slurmctld.log
SlurmdLogFile={hosts}/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=20
MessageTimeout=10
{nodes}
PartitionName=all Nodes={names} Default=YES MaxTime=INFINITE State=UP
""")

    def _host_files(self, host: str) -> Path:
        """The host's own folders: munge socket, /etc/containers (podman's store and registry
        settings), /var/lib/containers, spool."""
        d = self.node_dir(host)
        for sub in ("munge", "etc-containers", "var-lib-containers", "spool", "store/graph", "store/run",
                    "store/tmp", "store/copy"):  # fmt: skip
            (d / sub).mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
        (d / "munge").chmod(0o755)
        etc = d / "etc-containers"
        if Path("/etc/containers/policy.json").is_file():
            shutil.copy("/etc/containers/policy.json", etc / "policy.json")
        else:
            (etc / "policy.json").write_text('{"default": [{"type": "insecureAcceptAnything"}]}\n')
        store = d / "store"
        # Run state on the host's own /dev/shm (a tmpfs of its own): a killed host comes back as a
        # rebooted one, with its images on disk and no stale container or mount state.
        (etc / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{store}/graph"\nrunroot = "/dev/shm/containers"\n'
        )
        # The registry speaks plain HTTP on an address only these namespaces have.
        (etc / "registries.conf").write_text(
            f'unqualified-search-registries = []\n[[registry]]\nlocation = "{self.registry}"\ninsecure = true\n'
        )
        # Host networking (no CNI/netavark state anywhere), cgroupfs (no systemd), the host's own temp folders.
        (etc / "containers.conf").write_text(
            f'[containers]\nnetns = "host"\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            f'tmp_dir = "/dev/shm/libpod"\nimage_copy_tmp_dir = "{store}/copy"\n'
        )
        return d

    def start_host(self, host: str) -> None:
        """munged and the host's Slurm daemon (the registry too on the controller), inside the host's
        network namespace and a mount and UTS namespace of its own."""
        d = self._host_files(host)
        name = self.hostname(host)
        key, sock = self.root / "munge.key", self.root / "munge" / "munge.sock"
        binds = ""
        if host != "ctl":  # the controller's munge socket is the one clients on the login side use
            binds += f"mount --bind {d}/munge {self.root}/munge\n"
        if Path("/var/lib/containers").is_dir():
            binds += f"mount --bind {d}/var-lib-containers /var/lib/containers\n"
        daemon = f"slurmctld -f {self.slurm_conf}" if host == "ctl" else f"slurmd -f {self.slurm_conf} -N {name}"
        script = f"""set -e
mount --make-rprivate /
{binds}mount --bind {d}/etc-containers /etc/containers
mount -t tmpfs -o size=64m tmpfs /dev/shm
hostname {name}
rm -f {d}/munge/munge.sock {d}/munge/munge.sock.lock
munged --force --key-file {key} --socket {sock} --pid-file {d}/munged.pid \\
  --log-file {d}/munged.log --seed-file {d}/munged.seed
{daemon}
"""
        if host == "ctl":
            (self.root / "registry.yml").write_text(
                f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {self.root}/registry\n"
                f"  delete:\n    enabled: true\nhttp:\n  addr: {self.registry}\n"
            )
            script += (
                f"setsid docker-registry serve {self.root}/registry.yml >{d}/registry.log 2>&1 </dev/null &\n"
                f"echo $! >{d}/registry.pid\n"
            )
        proc = subprocess.run(
            self.exec_line(host, "unshare", "--mount", "--uts", "--propagation", "private", "bash", "-c", script),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise ClusterError(f"{name} did not start: {proc.stderr.strip()[-800:]}")
        if host == "ctl":
            self._wait_registry()

    def _wait_registry(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        check = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)"
        while time.monotonic() < deadline:
            probe = subprocess.run(
                self.exec_line("ctl", sys.executable, "-c", check, f"http://{self.registry}/v2/"), capture_output=True
            )
            if probe.returncode == 0:
                return
            time.sleep(0.3)
        log = self.node_dir("ctl") / "registry.log"
        raise ClusterError(f"the registry on {self.registry} did not answer: {log.read_text()[-800:]}")

    def sinfo(self) -> dict[str, str]:
        """node name -> Slurm's state of it (idle, mix, alloc, down*, ...)."""
        proc = subprocess.run(
            self.exec_line("ctl", "sinfo", "-h", "-N", "-o", "%N %t"),
            capture_output=True, text=True, check=False, env={**os.environ, **self.env},
        )  # fmt: skip
        return dict(line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2)

    def wait_nodes(self, idle: tuple[str, ...], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        wanted = {self.hostname(n) for n in idle}
        while time.monotonic() < deadline:
            states = self.sinfo()
            if all(states.get(n, "").rstrip("*") in ("idle", "mix", "alloc") and not states[n].endswith("*")
                   for n in wanted):  # fmt: skip
                return
            time.sleep(0.5)
        logs = "; ".join(
            (self.node_dir(h) / f).read_text()[-400:]
            for h, f in (("ctl", "slurmctld.log"), *((n, "slurmd.log") for n in idle))
            if (self.node_dir(h) / f).exists()
        )
        raise ClusterError(f"nodes {sorted(wanted)} not up within {timeout:.0f} s (sinfo: {self.sinfo()}): {logs}")

    # ---------------------------------------------------------------- faults

    def kill_host(self, host: str) -> list[int]:
        """The host dies: SIGKILL to every process in it (its Slurm daemon, munged, the cells and
        their containers), nothing told first. Returns the pids killed."""
        pids = self.pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.pids(host) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pids

    def cut_registry(self, node: str) -> None:
        """The registry unreachable from ``node``: its packets to the registry's port refused
        (REJECT: the node learns at once; DROP would cost a TCP timeout per pull)."""
        _run(*self.exec_line(node, "iptables", "-A", "OUTPUT", "-p", "tcp", "-d", self.address("ctl"),
                             "--dport", str(REGISTRY_PORT), "-j", "REJECT", "--reject-with", "tcp-reset"))  # fmt: skip

    def mend_registry(self, node: str) -> None:
        _run(*self.exec_line(node, "iptables", "-D", "OUTPUT", "-p", "tcp", "-d", self.address("ctl"),
                             "--dport", str(REGISTRY_PORT), "-j", "REJECT", "--reject-with", "tcp-reset"))  # fmt: skip

    def podman(self, node: str, *args: str) -> subprocess.CompletedProcess:
        """podman inside ``node`` (its store)."""
        return subprocess.run(self.enter_line(node, "podman", *args), capture_output=True, text=True, check=False)

    # ---------------------------------------------------------------- stop

    def stop(self) -> None:
        """Every process of every host killed by pid, then the namespaces deleted (their links,
        bridge and mounts go with them)."""
        for host in (*NODES, "ctl"):
            if self.ns(host) not in namespaces():
                continue
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in self.pids(host):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                deadline = time.monotonic() + (5 if sig == signal.SIGTERM else 10)
                while self.pids(host) and time.monotonic() < deadline:
                    time.sleep(0.1)
            _run("ip", "netns", "delete", self.ns(host), check=False)


def namespaces() -> list[str]:
    return [line.split()[0] for line in _run("ip", "netns", "list", check=False).stdout.splitlines() if line.strip()]


def leftovers(cluster: Cluster) -> list[str]:
    """What of ``cluster`` is still on this machine: namespaces, links named after it, mounts under
    its folder or of its namespaces, processes whose command line names its folder."""
    found = [f"namespace {n}" for n in namespaces() if n.startswith(cluster.prefix)]
    links = _run("ip", "-o", "link", "show", check=False).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines() if cluster.prefix in line]
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    found += [f"mount {m.split()[4]}" for m in mounts if str(cluster.root) in m or cluster.prefix in m]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if str(cluster.root) in cmdline and int(proc.name) != os.getpid():
                found.append(f"process {proc.name}: {cmdline[:120]}")
    return found


def new_cluster(root: Path) -> Cluster:
    token = secrets.token_hex(3)
    return Cluster(root, f"xpk{token}", 1 + int(token, 16) % 250)


def push_image(cluster: Cluster, image: str, repository: str, docker_host: str) -> str:
    """Copy ``image`` from the Docker engine at ``docker_host`` into the cluster's registry as
    ``<registry>/<repository>`` (skopeo inside the controller: the engine's socket is a path, the
    registry's address is the controller's); returns the manifest digest the registry holds. The
    manifest stays Docker's (v2 schema 2) so the config, and with it the image ID, is the engine's
    own: an OCI conversion rewrites the config and the ID with it."""
    digest_file = cluster.root / f"digest-{secrets.token_hex(4)}"
    target = f"docker://{cluster.registry}/{repository}"
    daemon = f"docker-daemon:{image}"
    cmd = cluster.exec_line(
        "ctl", "skopeo", "copy", "--quiet", "--src-daemon-host", docker_host, "--dest-tls-verify=false",
        "--digestfile", str(digest_file), daemon, target,
    )  # fmt: skip
    _run(*cmd)
    digest = digest_file.read_text().strip()
    digest_file.unlink()
    return digest


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.support.nscluster start|stop DIR", file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    if os.geteuid() != 0:
        print("nscluster: needs root (namespaces, mounts, slurmd)", file=sys.stderr)
        return 1
    if argv[0] == "stop":
        if not (root / "cluster.json").is_file():
            print(f"nscluster: no cluster in {root}", file=sys.stderr)
            return 1
        cluster = Cluster.load(root)
        cluster.stop()
        left = leftovers(cluster)
        print("\n".join(left) or f"nscluster: stopped; nothing of {cluster.prefix} left")
        return 1 if left else 0
    if missing_tools():
        print("nscluster: missing " + ", ".join(missing_tools()), file=sys.stderr)
        return 1
    cluster = new_cluster(root)
    try:
        cluster.start()
    except ClusterError as exc:
        cluster.stop()
        print(f"nscluster: {exc}", file=sys.stderr)
        return 1
    print(f"SLURM_CONF={cluster.slurm_conf}")
    print(f"REGISTRY={cluster.registry}")
    print(f"LOGIN='nsenter --net=/run/netns/{cluster.ns('ctl')} --'  # run sbatch and invoke matrix there")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
