"""coresets"""
