"""The optional PyTorch parts: measuring costs and running schedules. Import needs torch."""
