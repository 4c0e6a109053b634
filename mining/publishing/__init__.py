"""What the project publishes: untrusted text made safe, licences, credits, the result in words, the leak bound a release is gated on."""
