"""module_utils/gpudirect_limits.py: the memlock limit RDMA jobs get, on real files.

Sources of the file contents (each quoted as published):

* tests/fixtures/limits/proc-1-limits-container.txt: /proc/1/limits of this project's
  development container (no systemd as PID 1, memlock unlimited).
* Debian 12's stock /etc/security/limits.conf (libpam-modules 1.5.2-6+deb12u1),
  tests/fixtures/limits/debian12-limits.conf, copied from a Debian 12 host.
* RHEL 7 Networking Guide, "Relaxing memlock restrictions for users", the
  /etc/security/limits.d/rdma.conf it shows:
  https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/7/html/networking_guide/sec-relaxing_memlock_restrictions_for_users
* TIBCO FTL 6.3.1, "Configuring Locked Buffer Memory for RDMA" (soft 8192, hard unlimited):
  https://docs.tibco.com/pub/ftl/6.3.1/doc/html/GUID-BE3E8CA1-A77A-4B3E-B8F2-D7B176B01EF8.html
* Red Hat MRG Messaging 3, "Configure Infiniband on a Messaging Client" (a "*" and a user entry):
  https://access.redhat.com/documentation/en-us/red_hat_enterprise_mrg/3/html/messaging_installation_and_configuration_guide/configure_infiniband_on_a_messaging_client
* Intel FPGA PAC D5005 quick start, "Memlock Limit" (one user unlimited):
  https://intel.com/content/www/us/en/docs/programmable/683394/2-0-1/memlock-limit.html
* `systemctl show -p DefaultLimitMEMLOCK -p DefaultLimitMEMLOCKSoft` and /proc/1/limits
  (tests/fixtures/limits/proc-1-limits-vm-debian12.txt) captured on the project's VM node (Debian 12, systemd 252.39-1~deb12u2, kernel
  6.1.0-50-amd64, 2 GiB) before and after gpudirect_host_prereqs, 2026-11-24.
The precedence rules are those of Linux-PAM's modules/pam_limits/pam_limits.c.
"""

import os

import pytest

from ansible.module_utils import gpudirect_limits as gl

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "limits")
GIB = 1024 ** 3

RHEL7_RDMA_CONF = """\
# configuration for rdma tuning
*       soft    memlock         unlimited
*       hard    memlock         unlimited
# rdma tuning end
"""

TIBCO_FTL = """\
* soft memlock 8192
* hard memlock unlimited
"""

MRG_MESSAGING = """\
* soft memlock 32768
andrew soft memlock 32768
"""

INTEL_FPGA = """\
user1    hard   memlock           unlimited
user1    soft   memlock           unlimited
"""

# roles/gpudirect_host_prereqs/templates/memlock-limits.conf.j2 as rendered on the VM node
PROJECT_FILE = """\
# Ansible managed (role host_prereqs)
# RDMA pins the memory it registers (ibv_reg_mr) and the queues it creates
# (ibv_create_qp); both fail under the usual 8 MiB locked-memory limit.
# "*" does not cover root, which needs no limit (CAP_IPC_LOCK).
*\tsoft\tmemlock\tunlimited
*\thard\tmemlock\tunlimited
"""

# the VM node, before gpudirect_host_prereqs: services get systemd 252's built-in 8M
VM_SHOW_BEFORE = "DefaultLimitMEMLOCK=8388608\nDefaultLimitMEMLOCKSoft=8388608\n"
# after gpudirect_host_prereqs wrote system.conf.d/90-gpudirect-memlock.conf and re-executed the manager
VM_SHOW_AFTER = "DefaultLimitMEMLOCK=infinity\nDefaultLimitMEMLOCKSoft=infinity\n"
SYSTEM_CONF_DEBIAN12_MEMLOCK = "[Manager]\n#DefaultLimitNOFILE=1024:524288\n#DefaultLimitMEMLOCK=8M\n"
PROJECT_DROPIN = """\
# Ansible managed (role host_prereqs)
# Locked-memory limit for RDMA users started by systemd (pam_limits does not
# apply to services).
[Manager]
DefaultLimitMEMLOCK=infinity
"""


def _read_fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def _login(*texts, base=(8388608, 8388608)):
    entries = []
    for n, text in enumerate(texts):
        entries += gl.parse_limits_file(text, "/etc/security/limits.d/%02d.conf" % n)
    return gl.login_memlock(entries, base, "PID 1: 8388608/8388608")


def test_debian_stock_limits_conf_sets_nothing_so_a_login_keeps_its_starting_limit():
    entries = gl.parse_limits_file(_read_fixture("debian12-limits.conf"), "/etc/security/limits.conf")
    assert entries == []
    login = gl.login_memlock(entries, (257548288, 257548288), "PID 1: 257548288/257548288")
    assert (login["soft"], login["soft_source"]) == ("257548288", None)
    assert login["domains"] == []


def test_rhel7_rdma_conf_gives_every_user_unlimited():
    login = _login(RHEL7_RDMA_CONF)
    assert (login["soft"], login["hard"], login["soft_bytes"]) == ("unlimited", "unlimited", None)
    assert login["soft_source"] == "/etc/security/limits.d/00.conf:2 *"
    assert login["hard_source"] == "/etc/security/limits.d/00.conf:3 *"


def test_soft_limit_stays_limited_when_only_the_hard_one_is_unlimited():
    login = _login(TIBCO_FTL)
    assert (login["soft"], login["hard"]) == (str(8192 * 1024), "unlimited")
    findings = gl.memlock_findings({"login": login, "service": None})
    assert findings[0][0] == "warn" and "new logins get memlock soft 8388608" in findings[0][1]


def test_user_entry_beats_star_whatever_the_order():
    entries = gl.parse_limits_file(MRG_MESSAGING + "* soft memlock unlimited\n* hard memlock unlimited\n")
    generic = gl.pam_memlock(entries, (65536, 65536))
    andrew = gl.pam_memlock(entries, (65536, 65536), user="andrew")
    assert generic["soft"] is None and generic["hard"] is None
    # andrew's own line wins over the later "*" one; his hard limit comes from "*"
    assert andrew["soft"] == 32768 * 1024 and andrew["hard"] is None
    assert andrew["soft_source"] == "limits.conf:2 andrew"


def test_later_file_wins_at_the_same_priority_and_hard_caps_soft():
    login = _login(RHEL7_RDMA_CONF, "*  -  memlock  1048576\n")
    assert (login["soft_bytes"], login["hard_bytes"]) == (GIB, GIB)
    login = _login("* soft memlock unlimited\n", "* hard memlock 65536\n")
    assert (login["soft_bytes"], login["hard_bytes"]) == (65536 * 1024, 65536 * 1024)


def test_group_entry_counts_for_members_only_and_group_only_setups_are_not_a_warning():
    text = "@rdma soft memlock unlimited\n@rdma hard memlock unlimited\n"
    login = _login(text)
    assert login["soft"] == "8388608"  # an ordinary user outside @rdma
    assert [(d["domain"], d["soft"]) for d in login["domains"]] == [("@rdma", "unlimited")]
    (severity, message), = gl.memlock_findings({"login": login, "service": None})
    assert severity == "info" and "outside @rdma" in message


def test_intel_fpga_user_file_names_the_user_and_star_is_untouched():
    login = _login(INTEL_FPGA)
    assert [(d["domain"], d["soft"], d["hard"]) for d in login["domains"]] == [("user1", "unlimited", "unlimited")]
    assert login["soft"] == "8388608"


def test_a_dash_line_for_the_user_stops_pam_limits_and_sets_nothing():
    entries = gl.parse_limits_file("andrew -\n* - memlock unlimited\n")
    assert gl.pam_memlock(entries, (65536, 65536), user="andrew")["soft"] == 65536
    assert gl.pam_memlock(entries, (65536, 65536), user="andrew")["stopped_by"] == "limits.conf:1 andrew -"
    # "* -" is not a stop line (pam_limits skips it); the generic user gets the "*" limit
    assert gl.pam_memlock(gl.parse_limits_file("* -\n* - memlock unlimited\n"), (65536, 65536))["soft"] is None


@pytest.mark.parametrize("value, expected", [
    ("unlimited", None), ("INFINITY", None), ("-1", None), ("-", None), ("64", 65536), ("67108864", 64 * GIB)])
def test_pam_values(value, expected):
    assert gl.pam_value_bytes(value) == expected


def test_lines_pam_limits_skips_are_skipped():
    text = "* soft memlock lots\n* soft nofile 1024\n* bogus memlock 1\n%admins - memlock unlimited\n"
    entries = gl.parse_limits_file(text)
    assert [e["domain"] for e in entries] == ["%admins"]
    # "%" domains count for maxlogins only
    assert gl.pam_memlock(entries, (1, 1))["soft"] == 1


def test_uid_range_entry_applies_to_a_known_uid_only():
    entries = gl.parse_limits_file("1000: - memlock unlimited\n")
    assert gl.pam_memlock(entries, (1, 1), uid=1001)["soft"] is None
    assert gl.pam_memlock(entries, (1, 1), uid=999)["soft"] == 1
    assert gl.pam_memlock(entries, (1, 1))["soft"] == 1


def test_limits_d_files_are_read_in_name_order_after_limits_conf(tmp_path):
    (tmp_path / "etc/security/limits.d").mkdir(parents=True)
    (tmp_path / "etc/security/limits.conf").write_text(_read_fixture("debian12-limits.conf"))
    (tmp_path / "etc/security/limits.d/90-gpudirect-memlock.conf").write_text(PROJECT_FILE)
    (tmp_path / "etc/security/limits.d/10-site.conf").write_text(TIBCO_FTL)
    (tmp_path / "etc/security/limits.d/README").write_text("* - memlock 1\n")
    login = gl.login_memlock(gl.read_limits(str(tmp_path)), (1, 1))
    assert login["soft"] == "unlimited"
    assert login["soft_source"] == "/etc/security/limits.d/90-gpudirect-memlock.conf:5 *"


def test_proc_limits_line():
    assert gl.parse_proc_limits(_read_fixture("proc-1-limits-vm-debian12.txt")) == (257548288, 257548288)
    assert gl.parse_proc_limits(_read_fixture("proc-1-limits-container.txt")) == (None, None)
    assert gl.parse_proc_limits("Max open files 1 2 files\n") is None


def test_systemctl_show_before_and_after_host_prereqs():
    assert gl.manager_memlock(gl.parse_systemctl_show(VM_SHOW_BEFORE)) == (8388608, 8388608)
    assert gl.manager_memlock(gl.parse_systemctl_show(VM_SHOW_AFTER)) == (None, None)
    with pytest.raises(ValueError):
        gl.manager_memlock({})


@pytest.mark.parametrize("value, expected", [
    ("infinity", (None, None)), ("8M", (8388608, 8388608)), ("64K:infinity", (65536, None)),
    ("1073741824", (GIB, GIB))])
def test_systemd_rlimit_syntax(value, expected):
    assert gl.parse_systemd_rlimit(value) == expected


def test_configured_value_last_drop_in_wins_and_comments_do_not_count():
    files = [("/etc/systemd/system.conf", SYSTEM_CONF_DEBIAN12_MEMLOCK)]
    assert gl.configured_manager_memlock(files) is None
    files.append(("/etc/systemd/system.conf.d/90-gpudirect-memlock.conf", PROJECT_DROPIN))
    assert gl.configured_manager_memlock(files) == {
        "soft": None, "hard": None, "source": "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf:5"}
    files.append(("/etc/systemd/system.conf.d/99-site.conf", "[Manager]\nDefaultLimitMEMLOCK=64M\n"))
    assert gl.configured_manager_memlock(files)["soft"] == 64 * 1024 ** 2


def test_drop_ins_sorted_by_name_across_directories(tmp_path):
    for d, name, text in (("etc/systemd/system.conf.d", "90-gpudirect-memlock.conf", PROJECT_DROPIN),
                          ("usr/lib/systemd/system.conf.d", "95-vendor.conf", "[Manager]\nDefaultLimitMEMLOCK=8M\n"),
                          ("usr/lib/systemd/system.conf.d", "90-gpudirect-memlock.conf", "[Manager]\nX=1\n")):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        (tmp_path / d / name).write_text(text)
    shown = [s for s, _ in gl.read_systemd_conf(str(tmp_path))]
    assert shown == ["/etc/systemd/system.conf", "/etc/systemd/system.conf.d/90-gpudirect-memlock.conf",
                     "/usr/lib/systemd/system.conf.d/95-vendor.conf"]
    assert gl.configured_manager_memlock(gl.read_systemd_conf(str(tmp_path)))["soft"] == 8388608


def test_service_pending_reexec_is_reported_and_still_a_finding():
    configured = gl.configured_manager_memlock([("/etc/systemd/system.conf.d/90-gpudirect-memlock.conf",
                                                 PROJECT_DROPIN)])
    service = gl.service_memlock(gl.parse_systemctl_show(VM_SHOW_BEFORE), configured)
    assert service["pending_reexec"] is True and service["soft"] == "8388608"
    (severity, message), = gl.memlock_findings({"login": None, "service": service})
    assert severity == "warn" and "next daemon-reexec" in message
    done = gl.service_memlock(gl.parse_systemctl_show(VM_SHOW_AFTER), configured)
    assert done["pending_reexec"] is False
    assert gl.memlock_findings({"login": None, "service": done}) == []


def test_a_lower_limit_waiting_for_daemon_reexec_is_a_finding_before_it_bites():
    # seen on the VM node: a drop-in with DefaultLimitMEMLOCK=64M written after gpudirect_host_prereqs, no reexec
    configured = gl.configured_manager_memlock([
        ("/etc/systemd/system.conf.d/90-gpudirect-memlock.conf", PROJECT_DROPIN),
        ("/etc/systemd/system.conf.d/99-site.conf", "[Manager]\nDefaultLimitMEMLOCK=64M\n")])
    service = gl.service_memlock(gl.parse_systemctl_show(VM_SHOW_AFTER), configured)
    assert service["soft"] == "unlimited" and service["pending_reexec"] is True
    (severity, message), = gl.memlock_findings({"login": None, "service": service})
    assert severity == "warn" and message.startswith(
        "services get memlock soft 67108864 after the next daemon-reexec or boot "
        "(/etc/systemd/system.conf.d/99-site.conf:2)")
    assert gl.memlock_lines({"login": None, "service": service, "login_reason": "x"})[1] == (
        "new services: soft unlimited, hard unlimited (systemd DefaultLimitMEMLOCK); soft 67108864, "
        "hard 67108864 after daemon-reexec (/etc/systemd/system.conf.d/99-site.conf:2)")


def _vm_facts(show, limits_texts):
    """The memlock facts of the VM node, as the module builds them, from the captures above."""
    entries = []
    for n, text in enumerate(limits_texts):
        entries += gl.parse_limits_file(text, "/etc/security/limits.d/%d.conf" % n)
    base = gl.parse_proc_limits(_read_fixture("proc-1-limits-vm-debian12.txt"))
    session = {"soft": "257548288", "hard": "257548288", "soft_bytes": 257548288, "hard_bytes": 257548288,
               "uid": 0}
    return dict(session, session=session, login=gl.login_memlock(entries, base, "PID 1: 257548288/257548288"),
                service=gl.service_memlock(gl.parse_systemctl_show(show)))


def test_issue_19_after_host_prereqs_the_root_session_limit_is_no_finding():
    before = _vm_facts(VM_SHOW_BEFORE, [_read_fixture("debian12-limits.conf")])
    assert [s for s, _ in gl.memlock_findings(before)] == ["warn", "warn"]
    after = _vm_facts(VM_SHOW_AFTER, [_read_fixture("debian12-limits.conf"), PROJECT_FILE])
    assert gl.memlock_findings(after) == []
    lines = gl.memlock_lines(after)
    assert lines[0].startswith("new logins: soft unlimited, hard unlimited (/etc/security/limits.d/1.conf:5 *)")
    assert lines[1] == "new services: soft unlimited, hard unlimited (systemd DefaultLimitMEMLOCK)"
    assert lines[2] == ("this Ansible session: soft 257548288, hard 257548288 (uid 0: root is outside "
                        "pam_limits' '*' and has CAP_IPC_LOCK)")


def test_old_facts_without_login_or_service_fall_back_to_the_session():
    assert gl.memlock_findings({"soft": "65536", "hard": "65536"})[0][0] == "warn"
    assert gl.memlock_findings({"soft": "unlimited", "hard": "unlimited"}) == []
    assert gl.memlock_lines({"soft": "65536", "hard": "65536"}) == ["soft 65536, hard 65536 (this Ansible session)"]
