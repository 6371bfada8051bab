"""coresets/families"""
