#!/bin/sh
# Runs inside the fresh debootstrap root (chroot) after the packages are installed.
# Argument: the masked units. Makes the tree a bootable, small, keyless device.
set -eu

# Mask what cannot run in a container.
for unit in "$@"; do
    ln -sf /dev/null "/etc/systemd/system/$unit"
done

# No host keys in the image: every container makes its own at first boot. One
# ed25519 key only: an RSA key costs far more CPU to make, at every device's first
# boot (a hundred devices start at once), and no client here needs one.
rm -f /etc/ssh/ssh_host_*
cat > /etc/systemd/system/msub-ssh-hostkeys.service <<'UNIT'
[Unit]
Description=Generate this device's SSH host key
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key

[Install]
WantedBy=multi-user.target
UNIT
mkdir -p /etc/systemd/system/multi-user.target.wants /etc/systemd/system/ssh.service.d
ln -sf /etc/systemd/system/msub-ssh-hostkeys.service \
    /etc/systemd/system/multi-user.target.wants/msub-ssh-hostkeys.service
cat > /etc/systemd/system/ssh.service.d/msub.conf <<'UNIT'
[Unit]
Wants=msub-ssh-hostkeys.service
After=msub-ssh-hostkeys.service
UNIT

# Root logs in with the run's key only.
cat > /etc/ssh/sshd_config.d/msub.conf <<'CONF'
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
CONF
mkdir -p /root/.ssh && chmod 700 /root/.ssh

# Every container gets its identity at boot (machine-id) and its name from podman.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id /etc/hostname

# Journal in memory only: devices are many, the disk is shared.
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n' > /etc/systemd/journald.conf.d/msub.conf

# Keep the image small.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \
    /usr/share/info/* /var/log/*.log /tmp/* /var/tmp/*
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
