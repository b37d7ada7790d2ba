"""sits-sign: Ed25519 keys and signatures for .sitsm artifacts.

    sits-sign keygen release.key                  # release.key + release.key.pub
    sits-sign sign model.sitsm --key release.key  # model.sitsm.sig
    sits-sign verify model.sitsm --trusted-key release.key.pub

`verify` checks the signature against the verified artifact without loading
its code. `sits-compile --sign KEY` signs as it writes; `sits-run`,
`sits-runtime` and `sits_mlir.runtime.load` take trusted keys (or
$SITS_TRUSTED_KEYS) and then refuse artifacts without a valid signature.
See sits_mlir.runtime.signing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sits-sign",
                                description="Sign .sitsm artifacts and check signatures.")
    sub = p.add_subparsers(dest="command", required=True)
    k = sub.add_parser("keygen", help="write a new Ed25519 private key and <key>.pub")
    k.add_argument("key", help="the private key file to create (PEM, mode 0600)")
    s = sub.add_parser("sign", help="sign an artifact: writes <artifact>.sig")
    s.add_argument("artifact")
    s.add_argument("--key", required=True, help="the Ed25519 private key (PEM)")
    s.add_argument("-o", "--output", help="the signature file (default: <artifact>.sig)")
    v = sub.add_parser("verify", help="check an artifact's signature (its code is not loaded)")
    v.add_argument("artifact")
    v.add_argument("--trusted-key", action="append", required=True, metavar="PUB",
                   help="an Ed25519 public key (PEM) to accept; repeatable")
    v.add_argument("--signature", help="the signature file (default: <artifact>.sig)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ..errors import SitsError

    try:
        from ..runtime import signing

        if args.command == "keygen":
            private, public = signing.generate_key(args.key)
            print(f"wrote {private} (private: keep it secret) and {public} (public)")
        elif args.command == "sign":
            print(f"wrote {signing.sign(args.artifact, args.key, args.output)}")
        else:
            key_id = signing.verify(args.artifact, args.trusted_key, args.signature)
            print(f"{args.artifact}: signed by trusted key {key_id}")
    except (ImportError, OSError, ValueError, SitsError) as e:
        print(f"sits-sign: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
