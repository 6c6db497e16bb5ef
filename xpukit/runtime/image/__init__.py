"""What the image knows about itself: the manifest written at build time (``manifest``) and the
probe ``invoke doctor`` runs inside it (``doctor_probe``)."""
