/* SSH signatures (OpenSSH PROTOCOL.sshsig, namespace "git") made with an
 * ed25519 key through libsodium, as DESIGN.md lays them out: what stock
 * `git verify-commit` / `git verify-tag` (gpg.format=ssh) and
 * `ssh-keygen -Y verify` accept. */
#ifndef KILN_MANIFEST_SSHSIG_H
#define KILN_MANIFEST_SSHSIG_H
#endif
