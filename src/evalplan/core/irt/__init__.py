"""Item response theory: the py-irt-compatible 2PL fit by SVI, and joint maximum likelihood."""
