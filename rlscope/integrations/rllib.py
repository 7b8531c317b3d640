"""placeholder"""
def install(m, p):
    return 0
