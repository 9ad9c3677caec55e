"""attenio.hdl"""
